// Package fleet gives the breakers of a service's instances one judgment of
// a dependency, through Redis: each instance trips on the fleet's window,
// an instance that opens opens the rest within about one sync interval, and
// half-open probing is coordinated so that the fleet sends a few probes,
// not one set per instance. It is opt-in per breaker (group or command);
// without it every breaker judges alone, which is bulwark's default.
//
//	f, err := fleet.New(fleet.Config{Addr: "127.0.0.1:6379", Service: "checkout"})
//	…
//	f.Attach(g.Breaker(), g.Name(), "") // a command.Group's breaker
//	f.Start()
//	defer f.Close()
//
// Shared state is advice, never a dependency of the call path. Calls never
// touch the network: one background goroutine, once per Interval (default
// one bucket of the breakers' window), pushes each breaker's own window and
// pulls the other instances' in one pipelined round trip bounded by
// Timeout, and hands their sum to the breaker (circuit.Breaker.SetExternal),
// which judges on its own window plus that sum. Each instance publishes its
// whole window (not deltas) in one hash field: a retried write never counts
// twice, and a dead instance's field ages out (readers delete it; the hash
// expires a window after the last write), so a breaker has three keys
// whatever the fleet's size and history.
//
// A local trip is published at once (the watcher kicks a sync) in a state
// key the others read at each sync, so the fleet opens within one Interval
// plus a round trip; the others open with reason fleet_open, which counts
// no failure. In the half-open state only the holder of a probe lease probes
// (3 × Interval, renewed by its holder at each sync while not closed); when its probes close its breaker it
// publishes that, and the others close with reason fleet_close, their
// windows cleared. Windows counted before the fleet's last close are
// ignored, so old failures cannot reopen it.
//
// When Redis is down, slow or partitioned, a sync fails within Timeout; the
// fleet then logs once, reports Status().Degraded ("shared state:
// degraded"), drops the external counts and lets every breaker probe on its
// own: each judges alone until a sync works again, then resynchronises.
// The external counts also expire by themselves after 3 × Interval, so a
// stuck sync can never leave a breaker judging on old data. Records that
// fail to parse, lie more than MaxSkew in the future (clock skew), are older
// than the window, or sit in a key of the wrong type are rejected, counted
// in Status().Rejected and logged once per episode, never trusted.
//
// Instances' wall clocks should agree within MaxSkew (NTP does far better).
//
// The fleet logs through Config.Logger. go-redis logs its own trouble (a
// pool that cannot dial, say) through one process-wide logger, to stderr
// by default, and has no logger per client; the fleet leaves it alone,
// since it belongs to every Redis client of the process. To send it to
// slog, call redis.SetLogger once in main (see the example).
package fleet
