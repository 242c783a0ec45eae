package command

import (
	"context"
	"time"

	"github.com/bulwark-go/bulwark/command/priority"
	"github.com/bulwark-go/bulwark/metrics"
)

// Runner is a command: the call to a dependency that Execute guards. T is
// the command's result type. Run should honour ctx: it carries the call's
// deadline and is cancelled when the caller gives up.
type Runner[T any] interface {
	Run(ctx context.Context) (T, error)
}

// Fallbacker is implemented by a command that can degrade: when Run fails,
// times out, is rejected or short-circuited, Execute calls Fallback with the
// caller's ctx and an *Error describing what happened, and serves the value
// it returns (marked degraded in Info). A fallback must not call the failing
// dependency. Returning an error that matches ErrFallbackMissing declines:
// the call ends as if the command had no fallback.
type Fallbacker[T any] interface {
	Fallback(ctx context.Context, err error) (T, error)
}

// Namer is implemented by a command that names itself. Without it, a
// command is named after its type ("getUser" for a getUser or *getUser).
// Calls with the same name in a group share a breaker and metrics.
type Namer interface {
	Name() string
}

// Discarder is implemented by a command whose results hold resources (a
// response body, a file). Execute calls Discard, once, with every non-zero
// value Run returned that no caller will receive, whatever error came with
// it: the value of a FAILURE (replaced by a fallback's or by an error), of a
// Run that finished after its deadline, or of one whose caller left. In pool
// mode Discard may run on the worker goroutine, after Execute returned. A
// panic in Discard is logged and goes no further.
type Discarder[T any] interface {
	Discard(v T)
}

// NoTimeout, as GroupConfig.Timeout, CommandConfig.Timeout or WithTimeout,
// disables the timeout: Run gets the caller's ctx as is and no timer is
// created.
const NoTimeout time.Duration = -1

// Option adjusts one call of Execute. Build it with WithTimeout, WithName,
// WithKey or WithPriority; it is a small value.
type Option struct {
	timeout  time.Duration
	name     string
	key      string
	instance string
	priority priority.Level // WithPriority's, plus 1; 0: none given
}

// WithTimeout overrides the command's timeout for this call. NoTimeout
// disables it; zero keeps the default. Any other negative value makes the
// call fail with a BAD_REQUEST error wrapping ErrInvalidConfig.
func WithTimeout(d time.Duration) Option { return Option{timeout: d} }

// WithName names the command for this call, overriding Namer and the type
// name; an empty name keeps the default. Each distinct name gets its own
// breaker and metrics, so names must come from a small fixed set, never
// from request data.
func WithName(name string) Option { return Option{name: name} }

// Info tells what happened during one call of ExecuteInfo.
type Info struct {
	// Command names the command (its group is the one the call was given,
	// and the one CallHook's methods are given).
	Command string
	// Event is the call's primary outcome, one of package metrics' events:
	// metrics.Success, Failure, Timeout, BadRequest, ShortCircuited,
	// ThreadPoolRejected, SemaphoreRejected, Cancelled, QueueTimeout,
	// RateLimited, ReadOnly, Coalesced, Throttled or PriorityRejected
	// (docs/events.md lists every event and its text on each surface).
	Event metrics.Event
	// Events holds every event the call emitted: the primary outcome, Slow,
	// one fallback event if a fallback was considered, the kind of a
	// degraded answer (metrics.DegradedStatic, DegradedLastGood,
	// DegradedFeatureOff or DegradedDeferred; none for a fallback that
	// declares no kind, see fallback.Degrader), ExceptionThrown if the caller got an
	// error, and for a half-open probe of the group's breaker or the
	// command's (see IsProbe) PROBE, with PROBE_SUCCESS or PROBE_FAILURE
	// as the breakers judged it: Events.Has(metrics.Probe) tells a probe.
	// Events.Has(metrics.DegradedDeferred) tells a deferred call: its
	// fallback durably deferred the work (a write enqueued for replay after
	// the dependency recovers) by returning an error matching ErrDeferred,
	// so the work is accepted, not yet done; Degraded is then true too.
	Events metrics.EventSet
	// Degraded is true when the value returned is a fallback's, never
	// otherwise; Event then says why the primary path failed.
	Degraded bool
	// Latency is the time the call took as the caller saw it, fallback
	// included. RunLatency is the time Run took, or zero when Run did not
	// return before the caller was answered (rejected, short-circuited,
	// detached after a timeout in Thread mode). RunLatency is measured from
	// the call's start, so it includes the admission and, in a Thread group,
	// the hand-off to the worker and back; in a group with a queue it starts
	// when a worker starts Run, leaving queue time out.
	Latency, RunLatency time.Duration
	// Attempts is how many attempts the call made: 1, or more when it was
	// retried (see package retry); 0 for a COALESCED call, which shared
	// another call's (see CommandConfig.Coalesce). Event, Events and RunLatency are
	// those of the last attempt; Latency covers all of them and the
	// backoffs between. Each earlier attempt was recorded in the metrics
	// with its own primary outcome (FAILURE or TIMEOUT) and RETRIED,
	// without fallback or EXCEPTION_THROWN events: the metrics count
	// attempts, the fallback and the caller's error once per call.
	Attempts int
}
