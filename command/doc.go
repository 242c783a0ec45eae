// Package command runs calls to dependencies as commands, Hystrix-style:
// each call goes through two circuit breakers (its group's and its own), a
// bulkhead (a goroutine pool or a semaphore) and a timeout, its outcome is
// counted in rolling metrics, and when it fails, times out or is refused, a
// fallback may serve a degraded value, which is always marked as such.
//
// A command is a struct with Run (and optionally Fallback); a Group is one
// dependency, created in a Registry:
//
//	type getUser struct{ id int }
//
//	func (c getUser) Run(ctx context.Context) (User, error)                 { return db.User(ctx, c.id) }
//	func (c getUser) Fallback(ctx context.Context, err error) (User, error) { return Guest, nil }
//
//	reg := command.NewRegistry(command.RegistryConfig{})
//	users, err := reg.NewGroup("users", command.GroupConfig{Timeout: 200 * time.Millisecond})
//	...
//	u, info, err := command.ExecuteInfo(ctx, users, getUser{id: 7})
//	if info.Degraded { // u is Guest: the fallback's, because of info.Event (TIMEOUT, ...)
//	}
//
// # Commands and groups
//
// A command's name is its Name method (Namer), else its type name ("getUser"
// for getUser or *getUser, computed once per type), or WithName for one call.
// Every name in a group has its own breaker (from GroupConfig.CommandBreaker)
// and its own metrics; commands of the same name share them, even if their
// types differ. Names must come from a small fixed set, never from request
// data: GroupConfig.MaxCommands (default 1000) caps them, and past it new
// names share the command "(overflow)". MaxNameLength (256 bytes) caps
// their length: a longer name, or one that is not valid UTF-8, is renamed
// when first seen (a valid prefix and a hash of the name), logged and
// counted, so that every exported name is valid and bounded.
//
// Fallback and Discard are found by their method sets: a Fallback with a
// pointer receiver on a command passed by value, or with another result
// type, is not one (a warning is logged at the type's first use). Guard a
// command at compile time:
//
//	var _ command.Fallbacker[User] = getUser{}
//
// A group (Hystrix's thread-pool key) owns the bulkhead, a group-level
// breaker (GroupConfig.Breaker), the default timeout, the fallback limiter
// and the bad-request classifier. A call runs only if both breakers admit it
// (the group's is asked first; if the command's refuses, the group's permit
// is released uncounted) and its outcome is recorded in both. So a failing
// command opens its own breaker while its siblings keep working, and a
// failing dependency opens the group's breaker for all of them. Defaults
// follow Hystrix: Thread strategy with 10 workers and no queue, 1 s timeout,
// 10 concurrent fallbacks, 10 s windows of 10 buckets, breakers that trip at
// 50% failures over at least 20 calls and stay open 5 s.
//
// # Outcomes
//
// Every call has exactly one primary outcome (Info.Event, one of package
// metrics' events: Info.Event == metrics.ShortCircuited), with Hystrix's
// event names. They are bulwark's one vocabulary: the events the metrics
// count, the outcome a circuit.Permit records, what a ProbeClassifier
// answers. docs/events.md lists every event and its one text on each
// surface (SHORT_CIRCUITED in Go and the logs, short_circuited as a label:
// Prometheus, httpguard's X-Degraded, go-metrics; its hystrix.stream key):
//
//   - SHORT_CIRCUITED: a breaker refused the call; Run did not run.
//   - THREAD_POOL_REJECTED, SEMAPHORE_REJECTED: the bulkhead was full (at
//     its size: MaxConcurrent, or the adaptive limit in force with
//     GroupConfig.Adaptive), or closed (see Closing); Run did not run.
//   - SUCCESS: Run returned no error before the deadline. It is also SLOW when
//     Run took longer than the command breaker's SlowCallDuration
//     (GroupConfig.CommandBreaker, or CommandConfig.Breaker).
//   - FAILURE: Run returned an error, or panicked (the error is an
//     *isolation.PanicError with the panic value and stack).
//   - TIMEOUT: the group's (or WithTimeout's) deadline passed first. In Thread
//     mode the caller is answered at the deadline and Run goes on in its
//     worker with a cancelled context, keeping its worker until it returns
//     (a hung dependency fills its own pool, not its callers' goroutines). In
//     Semaphore mode Run runs on the caller's goroutine, so a Run that ignores
//     its context keeps the caller; a Run that returns after the deadline is a
//     TIMEOUT whatever it returned (even a bad request: the deadline wins, and
//     the error does not report IsBadRequest). Run's context carries the
//     caller's values and ends at the deadline: its Err and context.Cause are
//     then context.DeadlineExceeded (the caller's own end, if first, keeps
//     the caller's error and cause). It arms no timer unless Run waits on its
//     Done channel.
//   - QUEUE_TIMEOUT (Thread with a queue): the deadline passed while the call
//     waited in the group's own queue; Run never started. It falls back and
//     its error matches ErrTimeout and isolation.ErrDropped, but the breakers
//     do not count it: the bulkhead was too small, not the dependency slow.
//   - BAD_REQUEST: the caller's fault: Run returned an error marked with
//     BadRequest, or one GroupConfig.IsBadRequest accepts. The error (and
//     Run's value) is returned exactly as Run returned them; no fallback.
//   - CANCELLED: the caller's context ended before Run returned, by
//     cancellation or by the caller's own deadline; no fallback. Give callers'
//     deadlines room above the group timeout: a call the caller's deadline
//     ends is CANCELLED, and the breakers never see a dependency that hangs
//     past it.
//   - RATE_LIMITED: a rate limiter of the group or command (GroupConfig.
//     RateLimit, KeyedRateLimit, CommandConfig.RateLimit; package ratelimit
//     has them) refused the call, before the breakers; Run did not run. It
//     falls back; its error matches ErrRefused and the limiter's own
//     (ratelimit.ErrLimited), and Error.RetryAfter says when to come back.
//     A limiter that waits (a pacer) and sees the caller's context end
//     makes the call CANCELLED instead.
//   - READ_ONLY: the group was in read-only mode (GroupConfig.ReadOnly,
//     Registry.SetReadOnly) and the call a write (a Write command); it was
//     refused first, before the limiters; Run did not run. It falls back (a fallback that defers the write fits); its error
//     matches ErrRefused. Reads go on.
//   - THROTTLED: the group's client-side throttle (GroupConfig.Throttle,
//     the SRE book's adaptive throttling) refused the call locally, after
//     the rate limiters and before the breakers, because the dependency has
//     accepted too few of the group's recent requests; Run did not run. It
//     falls back, is never retried, and its error matches ErrRefused.
//
// A degraded answer (Info.Degraded) carries its kind, an event beside
// FALLBACK_SUCCESS in Info.Events and in the metrics: DEGRADED_STATIC,
// DEGRADED_LAST_GOOD, DEGRADED_FEATURE_OFF or DEGRADED_DEFERRED, or none
// for a fallback that declares no kind (see fallback.Degrader).
//
// The breakers count only the calls that reached the dependency: SUCCESS,
// FAILURE and TIMEOUT. Refusals, rejections, queue timeouts, bad requests
// and cancellations release their permits uncounted: counting our own
// refusals as the dependency's failures would make a breaker excite itself.
//
// Every value Run returns that the caller does not receive (returned with a
// FAILURE's error, or too late, or by a detached Run) is handed to the
// command's Discard method (Discarder), if any, so that its resources (a
// response body) can be freed.
//
// A Run that outlives its caller (in a Thread group, one left detached at
// its deadline or when its caller gave up) must never write memory the
// caller owns, nor read what the caller may change once Execute has
// returned (a reply the command captured to fill in, a slice, a header
// map, a request the caller reuses): that is a data race, and a late write
// that shows only under load. Give Run its own copies instead: copy the
// inputs before Execute, let Run write into a value it allocates and
// returns, and copy that value into the caller's memory after Execute has
// returned it, on the caller's goroutine (package
// github.com/bulwark-go/bulwark/grpc/grpcguard does this with gRPC
// messages). A Semaphore group's Run never outlives Execute.
//
// Whatever Run does, and whatever a hook panics with, an admitted call
// releases everything it took and records exactly one outcome: a panic in
// Run or Fallback is a FAILURE or FALLBACK_FAILURE; a panic in IsBadRequest
// (which then judges "not a bad request"), Discard or a breaker's
// OnTransition is logged and goes no further; a runtime.Goexit in Run ends
// Run's goroutine, as Goexit must, but the call is first recorded as a
// FAILURE (in a Thread group the pool reports it as a panic). A Goexit in a
// hook or a Fallback on the caller's goroutine is not covered: it ends
// Execute without recording the call. A nil context or *Group panics with a message saying what to
// pass; a nil command is refused with an error wrapping ErrInvalidConfig.
//
// Errors: a call that produced no value returns an *Error. errors.Is matches
// ErrRefused for every refusal bulwark makes itself (and the refusing
// layer's own sentinel: circuit.ErrOpen, isolation.ErrRejected,
// ratelimit.ErrLimited; Error.Event says which refusal), ErrTimeout (and
// context.DeadlineExceeded), ErrFallbackRejected, ErrFallbackMissing and,
// for CANCELLED, the context's error; errors.As reaches Run's own error
// through it.
//
// # Retries
//
// A group with GroupConfig.Retry retries the calls of commands that
// implement Idempotent (and answer true) whose attempt ended as FAILURE or
// TIMEOUT: never a short-circuit, a rejection, a queue timeout, a rate-limit
// refusal, a bad request or a cancellation. The retry waits an exponential
// backoff with full jitter, or the dependency's Retry-After (see
// Error.RetryAfter) up to retry.Config.MaxRetryAfter, never past the caller's
// deadline; a budget per group holds retries to a share of the calls
// (default 20% over the window, plus 1 per second), so that a dependency
// that fails every call sees about 1.2 times the load, not MaxAttempts
// times. Each attempt is a real call, through the limiters, the breakers
// and the bulkhead, counted in the metrics with its own outcome, and an
// attempt that is retried also with RETRIED (the budget reads the retries
// there; the dashboard, the native stream, go-metrics and Prometheus show
// them); the fallback runs once, after the last attempt, and Info.Attempts
// says how many were made. A group without Retry pays nothing for it.
//
// # Hedged requests
//
// CommandConfig.Hedge (a hedge.Config) hedges the calls of an Idempotent
// command against a long tail: when an attempt has not answered after a
// delay (fixed, or a percentile of the command's own Run latency, clamped),
// another attempt of the same call starts beside it, up to MaxHedges more.
// The first attempt to succeed answers the caller; the others are
// cancelled, and a value one returns anyway goes to Discard. Each attempt
// goes through both breakers and the bulkhead and is recorded with its own
// outcome (the breakers see it); the attempts whose answer the caller did
// not take also carry HEDGED, so metrics.Counts.Calls counts the call
// once. Hedges share the group's retry budget (RETRIED and HEDGED count together) under their
// own BudgetRatio (default 5%), start only while both breakers are closed
// (never beside a half-open probe, never on an open breaker), and are not
// asked of the rate limiters. A hedged attempt runs on a goroutine of its
// own, in a Semaphore group too, while the caller waits for the first
// answer. See docs/hedging.md.
//
// # Request coalescing
//
// A command with CommandConfig.Coalesce shares one Run among its
// concurrent calls of the same key (its Key method, Keyer; a call without
// a key runs alone, and WithKey, the rate limit's key, plays no part): the
// singleflight pattern, Hystrix's collapser idea, against a stampede of
// identical reads. The first call of a key starts a flight: its own call,
// made on a goroutine of its own with the caller's context values but not
// its cancellation, through every stage (limiters, breakers, bulkhead,
// retries, fallback) and recorded once, with its own outcome, as that
// caller's call. Every call of the key that comes while it runs waits for
// its answer (value, error,
// degraded mark) and gets it as its own, with its own Info: its primary
// outcome is COALESCED (and the fallback event of the answer it shares,
// if any), not counted by the breakers, so for N identical calls the
// breakers count one call and COALESCED counts N−1 (the dependency's load
// is the calls less COALESCED). A caller's own deadline still holds: a
// call that joined a flight and whose own timeout passes first ends as a
// TIMEOUT answered by its own fallback (the breakers do not count it: the
// flight's outcome is theirs), one whose context ends as CANCELLED, and
// the flight goes on for the others; the first caller may leave too
// (CANCELLED), its call being the flight's. A value no caller takes goes
// to Discard. Coalesced calls do not reach the limiters: they cost the
// dependency nothing.
//
// The answer is shared: each caller gets a copy of the same T, so a T that
// holds pointers, slices or maps must be read-only to its callers, and
// Run, which may outlive any one caller, must not write memory a caller
// owns (see below). With a fallback.LastGood fallback, a call that finds a
// flight of its key is answered at once with the last good value if it is
// no older than its maximum age (COALESCED and FALLBACK_SUCCESS, degraded):
// stale while revalidate, one refresh in flight per key.
//
// # Fallbacks and degradation
//
// On FAILURE, TIMEOUT, a rejection or a short-circuit, Execute calls the
// command's Fallback (Fallbacker) with the caller's context and the *Error,
// under the group's fallback limit, and emits one of FALLBACK_SUCCESS,
// FALLBACK_FAILURE (it returned an error or panicked), FALLBACK_REJECTION
// (the limit was reached) or FALLBACK_MISSING (no Fallback, NoFallback
// embedded, or the Fallback declined by returning ErrFallbackMissing). A
// value served by a fallback is degraded: Info.Degraded says so (and
// Info.Event why), and it counts in the degraded rate of the command's
// window (metrics.Counts.DegradedRate). Execute alone cannot tell a
// degraded value from a real one; use ExecuteInfo where it matters.
// EXCEPTION_THROWN is emitted whenever the caller gets an error.
//
// Package fallback holds ready-made fallbacks: fallback.Static serves a
// fixed value, fallback.FeatureOff the zero value marked "feature off",
// fallback.LastGood the last good value while it is younger than its
// maximum age. NoFallback marks a command that must fail loudly (a payment
// never "succeeds" by fallback). Embed one in a command struct to give it a
// Fallback (or, with NoFallback, to promise it has none):
//
//	type getPrice struct {
//		*fallback.LastGood[float64] // Fallback: the last price, if recent enough
//		feed *Feed
//	}
//
// A fallback must not call the dependency that just failed.
//
// # Metrics
//
// Each command records its events and its run and total latencies in a
// metrics.Rolling window; a group's counts are the sum of its commands', and
// its window's Max is the peak of calls running at once; a command's Max is
// the peak of its own calls in flight, and CommandSnapshot.Detached counts
// its calls that timed out and still run in the pool. Registry.Snapshot
// reads them all (cheap enough to call every 500 ms); RegistryConfig.Exporter
// publishes them elsewhere, such as into a go-metrics registry through
// package [github.com/bulwark-go/bulwark/gmbridge]. Nothing exported is on
// the call path.
//
// A registry's CallHook (RegistryConfig.Hook) sees every attempt begin and
// end on the caller's goroutine, with its context and Info: the place for
// tracing (package github.com/bulwark-go/bulwark/otel/bulwarkotel, in its
// own module, reports calls to OpenTelemetry). Without one, a call pays a
// nil test per attempt.
//
// # Probes and alerts
//
// A half-open probe's Run can tell it is one (IsProbe), Info.Events says so,
// and the metrics count PROBE, PROBE_SUCCESS and PROBE_FAILURE.
// GroupConfig.ProbeClassifier judges a failed probe apart from normal calls.
// GroupConfig.Alerts takes the group's alerting (an *alert.Watcher: package
// [github.com/bulwark-go/bulwark/alert] raises alerts, by tier, for breakers
// open for long, and an alarm for a command's degraded rate), which reads
// the group's snapshots and is told of each failed call's error and ctx
// (to read its request ID).
//
// # Cost
//
// A successful call in a Semaphore group without a timeout takes no lock and
// makes no allocation; PERFORMANCE.md, at the repository's root, says what
// each path costs and how it is measured.
//
// # Live changes
//
// Group.Reconfigure and Group.ReconfigureCommand change a running group's
// bulkhead size, timeouts, fallback limit, breakers and per-command
// settings, validated first and applied to the next call; Preset returns
// ready-made configs (L1/L2/L3 tiers, strong, never-degrade, the
// recommended dependency preset for an HTTP or gRPC dependency, and the
// source's govkit defaults); package
// [github.com/bulwark-go/bulwark/rules] applies them from a watched file.
//
// # Closing
//
// Registry.Close is final: it closes every group, then NewGroup and
// GroupOrNew return ErrClosed. It waits for the calls still running,
// detached ones included, until its ctx ends: give it a deadline.
//
// A call to a closed group (Group.Close or Registry.Close), or one still
// queued in its pool when Close stops waiting, never runs: its closed
// bulkhead refuses it, so its one outcome is THREAD_POOL_REJECTED or
// SEMAPHORE_REJECTED, the breakers do not count it and its fallback runs,
// as for any rejection; but its error (the one the fallback gets too)
// matches ErrClosed and isolation.ErrClosed, not ErrRefused, so that a
// shutdown does not read as a full bulkhead. (A closed group is gone from
// the registry's snapshots and its exporter, so these
// rejections show only in its own Group.Snapshot.)
//
// # HTTP
//
// Package [github.com/bulwark-go/bulwark/httpguard] builds on this one: an
// http.RoundTripper that runs each request as a command in a group per
// host.
package command
