// Package fleet lets the breakers of a service's instances judge a
// dependency together, through Redis: what several instances see failing
// opens the others within about one sync interval, and half-open probing is
// coordinated so that the fleet sends a few probes, not one set per
// instance. It is opt-in per breaker (group or command); without it every
// breaker judges alone, which is bulwark's default.
//
//	f, err := fleet.New(fleet.Config{Addr: "127.0.0.1:6379", Service: "checkout"})
//	…
//	err = f.Attach(g.Breaker(), g.Name(), "") // a command.Group's breaker
//	err = f.Start()
//	defer f.Close()
//
// Shared state is advice, never a dependency of the call path. Calls never
// touch the network, and a breaker's own window is never mixed with the
// fleet's: each breaker trips on its own evidence exactly as it would
// alone. The fleet joins each attached breaker as the party that shares
// its judgment (circuit's "Shared judgment", through bulwark's internal
// engine: an interface users need not implement); one
// background goroutine, once per Interval (default one bucket of the
// breakers' window) and at once when an attached breaker changes state,
// pushes each breaker's own window and pulls the other instances' in one
// pipelined round trip bounded by Timeout, judges what came back, and moves
// the breaker only through its membership (reasons fleet_open and
// fleet_close, ReasonOpen and ReasonClose, neither counting a local
// failure).
//
// # What a breaker does
//
// An instance counts as failing when its own window holds at least one
// failed or timed-out call at the breaker's FailureRatio or above (or, with
// slow-call detection on, slow calls at SlowCallRatio). The quorum
// (Config.Quorum) holds when at least Quorum.Instances instances (default
// and minimum 2) are failing and the fleet's recent calls, every counted
// window summed, number at least the breaker's MinRequests with at least
// Quorum.Ratio of them failed (default: the breaker's FailureRatio). An
// instance's window is healthy when it holds MinRequests calls or more,
// below both ratios.
//
//	what the breaker sees                          what it does
//	---------------------------------------------  ---------------------------------------------
//	its own window trips                           trips (error_ratio, slow_ratio), whatever the
//	                                               fleet's windows say: they never dilute it
//	one instance failing, however badly            nothing: one bad network path opens no other
//	                                               instance (that one trips on its own window)
//	the quorum holds; closed, own window not       opens, reason fleet_open
//	healthy (too few calls of its own, or failing)
//	the quorum holds; closed, own window healthy   keeps serving; opens with Quorum.Follow
//	the quorum holds; open or half-open            nothing: its own probes decide
//	half-open, the fleet coordinating              probes only while it holds the probe lease
//	half-open with traffic, lease free or lapsed   takes the lease at its next sync and probes
//	it holds the lease and sent no probe since     gives the lease up: an idle holder never
//	its last sync                                  stalls the recovery of instances with traffic
//	its probes close it while the fleet is open    closes (probes_succeeded) and closes the fleet:
//	                                               a new epoch; the others close, fleet_close
//	it closes on its own otherwise (local probes,  a new epoch for itself only: older windows no
//	Reset, a forced mode)                          longer count for it
//	Redis unreachable for DegradeAfter syncs       degraded: judges and probes alone, logged once
//	before the first sync, after Close             judges and probes alone
//	garbage, skewed or stale records               rejected, counted, never trusted
//
// # Epochs
//
// A close starts a new epoch, and nothing from before it may judge after
// it, whatever the timing of syncs. The fleet state (a small record in
// Redis, changed only by one Lua script, atomically) holds the latest
// epoch, the epoch the last fleet-wide close started, and whether the fleet
// has opened since. Every window is published with the epoch its contents
// belong to: a breaker that closes starts its window in the new epoch (the
// close cleared it); one that merely learns of a newer epoch keeps its
// window's older tag until everything counted before has left the window
// (one window length), so no count is ever relabelled. A breaker counts
// only windows of the epoch of its own last close or later. A decision is
// applied tied to the look at the breaker it was made on, so a sync still in flight when the breaker closes cannot move
// it afterwards. Leases carry the epoch too: one taken before the last
// fleet-wide close is void.
//
// # Shared state degraded
//
// A sync that fails (Redis down, slow, paused or partitioned) changes
// nothing; DegradeAfter of them in a row (default 3: about 3 × Interval
// with Redis gone, 3 × Timeout with Redis paused) declare shared state
// degraded: the fleet logs once, Status().Degraded reports it ("shared
// state: degraded (…)", also in the breakers' Snapshot.Shared), and every
// breaker judges and probes alone until a sync works again; then the fleet
// resynchronises, and a Redis restarted empty is brought back up to the
// epochs the instances know. Until then a breaker keeps what the last good
// sync told it. Timeout defaults to the larger of Interval and 500 ms, so
// that a slow round trip on a loaded host is not taken for an outage
// (docs/fleet.md tells what shorter timeouts did). Records that fail to parse, lie more than MaxSkew in the future
// (clock skew), are older than the window, or sit in a key of the wrong
// type are rejected, counted in Status().Rejected and logged once per
// episode; a key of the wrong type makes its breaker judge alone.
//
// Instances' wall clocks should agree within MaxSkew (NTP does far better),
// and attached breakers should use the system clock, whose time their
// windows age by. The record formats carry a version ("v2"): instances of
// an earlier version reject them, so upgrade a service's instances
// together, or give the new ones another Prefix.
//
// # Keys
//
// Each instance publishes its whole window (not deltas) in one hash field:
// a retried write never counts twice, and a dead instance's field ages out
// (readers delete it; the hash expires a window after the last write). A
// breaker has three keys whatever the fleet's size and history:
// Prefix:Service:group:command:{w,s,p}, the windows, the fleet state and the
// probe lease, all with TTLs.
//
// The fleet logs through Config.Logger. go-redis logs its own trouble (a
// pool that cannot dial, say) through one process-wide logger, to stderr
// by default, and has no logger per client; the fleet leaves it alone,
// since it belongs to every Redis client of the process. To send it to
// slog, call redis.SetLogger once in main (see the example).
package fleet
