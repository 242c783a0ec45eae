// Package circuit is bulwark's circuit breaker: it watches the outcomes of
// calls to one dependency over a rolling window and, when too many fail or
// are slow, refuses calls at once (0 ms) instead of letting every caller wait
// for a dependency that is down. After a while it lets a few probe calls
// through and closes again when they succeed.
//
// A call is two steps: Allow admits it (or refuses with an error that
// satisfies errors.Is(err, ErrOpen)), and Record on the returned Permit
// reports how it went, as the call's primary outcome in bulwark's one
// vocabulary of events (metrics.Success, metrics.Failure, metrics.Timeout;
// any other event, such as metrics.Cancelled, is not the dependency's doing
// and is not counted). Both are lock-free and allocation-free while the
// breaker is closed.
//
//	b, err := circuit.New(circuit.Config{Name: "users-db"})
//	if err != nil { ... }
//	p, err := b.Allow()
//	if err != nil {
//		return fallback() // refused: errors.Is(err, circuit.ErrOpen)
//	}
//	start := time.Now()
//	err = callUsersDB()
//	p.Record(outcomeOf(err), time.Since(start)) // metrics.Success, or metrics.Failure
//
// The events and their text on every surface (Info.Event, headers,
// Prometheus labels, the Hystrix stream) are listed in docs/events.md.
//
// Config reads in the order a breaker works: when a closed breaker trips
// (Window, MinRequests, FailureRatio, SlowCallDuration, SlowCallRatio,
// Confidence), how long it stays open (OpenDuration, OpenBackoff,
// OpenMaxDuration), the half-open trial (HalfOpenProbes,
// HalfOpenSuccesses, HalfOpenFailures, HalfOpenMaxWait), how traffic comes
// back (RampDuration, RampFloor, RampDoubling, RampFunc, then WarmUp), then
// how it is run (Mode, Clock, Logger, OnTransition). A validation error
// names the field, such as HalfOpenProbes.
//
// # States
//
// Closed: every call is admitted; Success, Failure and Timeout outcomes fill
// a window of counts (Config.Window). Once the window holds at least
// MinRequests such calls, a failure, timeout or slow call that brings
// (Failure+Timeout)/calls to FailureRatio opens the breaker (reason
// error_ratio), or slow/calls to SlowCallRatio (reason slow_ratio; error_ratio
// wins when both hold). A success never trips the breaker, even when expiring
// buckets have raised the ratio: the verdict is taken on the outcome that can
// raise it. Detection therefore takes about window × ratio: with a 1 s window
// and 0.5, a full outage trips the breaker about 500 ms after it starts.
// With Config.Confidence set, the ratios are replaced by the lower bounds
// of their Wilson score intervals at that confidence (Health.ErrorBound,
// SlowBound): noise in a thin window no longer trips the breaker, and an
// outage trips it a little later (docs/confidence.md).
//
// Open: every call is refused with ErrOpen for the open duration. The breaker
// never sleeps and starts no goroutine: the first Allow, State or Snapshot at
// or after the deadline turns it half-open (reason open_elapsed), and that
// Allow becomes the first probe.
//
// Half-open: at most HalfOpenProbes calls are in flight at once; others
// are refused (ErrOpen, "probes all in flight"). HalfOpenSuccesses successful probes in a
// row close the breaker (probes_succeeded); a probe that fails, times out or
// (with slow-call detection on) is slow opens it again (probe_failed), or
// HalfOpenFailures of them in a row do. A hung probe cannot keep it
// half-open: when probes are in flight and no result has come back for
// HalfOpenMaxWait (counted from the first probe's admission, or from the
// last result), the next look at it opens it again (half_open_timeout). Time
// with no probe in flight does not count, so a healthy dependency with
// sparse traffic (one call per open duration) still closes it after
// HalfOpenSuccesses calls. Both ways of reopening are failed trials: the
// open duration is multiplied by OpenBackoff, up to OpenMaxDuration. Closing
// resets the open duration, clears the window (old failures must not reopen
// it at once) and, with RampDuration set, starts a ramp-up.
//
// Ramp-up: after closing, the share of calls admitted rises from RampFloor
// to 1 over RampDuration (linearly; RampDoubling doubles it every
// RampDoubling; RampFunc gives any schedule); the others are refused
// (ErrOpen, "shed during ramp-up"). The shedding is deterministic: the k-th call of the ramp is
// admitted iff floor((k+1)·s) > floor(k·s) for the current share s.
//
// Warm-up: outcomes recorded within WarmUp of the breaker's creation, or
// of the last WarmUp call (a deploy hook's), are not counted, so cold
// caches cannot trip it.
//
// # Operating policies
//
// Each is off by default (Hystrix's behaviour); docs/policies.md tells the
// incident behind each: HalfOpenFailures (reopen
// only after N failed probes in a row), RampDoubling and RampFunc (how
// traffic comes back after closing) and Breaker.WarmUp (a restartable
// warm-up). A health check that ends an open period early (a Check run
// every Interval while the breaker is open, whose success turns it
// half-open at once, reason health_check) is a room of its own, package
// circuit/healthcheck: it is started on a breaker and stopped with its own
// handle, so a Breaker never starts a goroutine and needs no Close.
//
// # Choices worth knowing
//
// Stale permits. Every change of state starts a new generation, and a Permit
// remembers the generation that issued it. An outcome recorded on a permit of
// an earlier generation is dropped: a closed-state call that ends after the
// breaker opened is not a probe result, and a probe of an earlier half-open
// state neither counts nor frees a slot of the current one. An outcome that
// does not count (any event but Success, Failure and Timeout) releases a
// probe slot without counting.
//
// Slow calls are successes slower than SlowCallDuration (strictly). Failures
// and timeouts count against the error ratio only.
//
// Time. All instants come from Config.Clock (inject a *metrics.ManualClock in
// tests). A transition caused by time alone is made, and stamped, when it is
// observed: an idle breaker looked at an hour after its open duration ran out
// turns half-open then. "Time in state" (Snapshot.Since) is measured from the
// last transition, or from creation.
//
// Modes. ForcedOpen refuses everything (ErrOpen, "forced open") and ForcedClosed
// admits everything; both pin the effective state and stop the state machine
// (outcomes under ForcedClosed are still counted in the window, but never
// trip it). Leaving a forced mode restarts the machine closed with an empty
// window: what was counted while forced closed does not carry over.
// ObserveOnly runs the state machine and reports its transitions but
// admits every call: a call the breaker would have refused gets a permit
// whose outcome is not counted, so the breaker goes through exactly the
// states it would in Normal mode; use it to roll a breaker out safely.
// SetMode reports a transition with reason forced when the effective state
// changes.
//
// Reporting. Every transition is logged as one Info record on Config.Logger
// (attributes breaker, from, to, reason, requests, failures, timeouts, slow,
// error_ratio, slow_ratio, open_duration) and passed to the observers
// (Observe) and Config.OnTransition. Reports are delivered in order, one
// at a time, never while the breaker's lock is held, possibly on another
// goroutine that is also making transitions; each transition is applied
// before it is reported. A panic in an observer or OnTransition is
// recovered and logged at Error level with its stack; it never reaches the
// caller and never stops later reports. Snapshot keeps the last 8.
//
// Live changes. Reconfigure replaces the configuration of a running breaker
// after validating it (a rejected one changes nothing): state, mode,
// deadlines and history stay, the window stays unless its shape changes.
// The effective settings sit behind one atomic pointer, so Allow on a
// closed breaker still reads only its state word. Snapshot.Config is the
// configuration in force.
//
// Reset. Breaker.Reset restarts a breaker closed, as if new, in one
// transition with reason reset (window cleared, backoff reset, a forced
// mode left for Normal, no ramp-up): what an operator's "reset" button
// means, with no intermediate state a call could see.
//
// Observers. Observe adds a function called with every transition (any
// number of them, each removed by the stop function Observe returns),
// after the log record and before OnTransition, under the same rules.
//
// Shared judgment. An outside party, such as the fleet state of module
// redis, may take part in a breaker's judgment through package
// circuit/party: it gates the half-open
// probes (so that a fleet sends a few, not one set per instance), reports
// a status (Snapshot.Shared), and opens or closes the breaker with reasons
// fleet_open and fleet_close, each move tied to the reading of the breaker
// it was decided on, so that a fleet verdict from before a close can never
// apply after it. The breaker's own window is never mixed with the party's
// data: it trips on its own evidence only. A closed breaker's Allow and a
// successful Record read none of this.
//
// # The engine
//
// The state machine lives in bulwark's internal/breaker package; Breaker is
// that engine's type, with the methods a user may call, and converting one
// to the other costs nothing. Package command uses the engine for what
// users must not: it hands it the clock readings it takes anyway (at the
// start and the end of a call) instead of letting it read the clock again,
// which is right only for a breaker created on the caller's own clock and
// for a reading taken for that call. Everything else, the fleet included,
// goes through the exported API, so no other module depends on an internal
// package. Neither package holds state of its own: everything hangs off the
// Breaker value.
package circuit
