// Package retry configures a group's retries (command.GroupConfig.Retry): a
// call of a command.Idempotent command whose attempt ended as FAILURE or
// TIMEOUT is tried again, up to MaxAttempts attempts in all, after a backoff,
// while the group's retry budget allows. The zero value of Config is off.
//
// Each attempt is a real call: it goes through the rate limiters, both breakers
// and the bulkhead again, so a retry storm cannot escape them, and it is
// counted in the command's metrics and in the breakers with its own primary
// outcome; an attempt that is retried also carries the event RETRIED (so the
// metrics count retries as well as attempts). A SHORT_CIRCUITED, *_REJECTED,
// QUEUE_TIMEOUT, RATE_LIMITED, THROTTLED, BAD_REQUEST or CANCELLED attempt is
// never retried: bulwark's own refusals and the caller's mistakes or departure
// are final. The fallback runs once, after the last attempt. The caller's
// deadline bounds the whole call: a retry whose backoff (plus
// command.GroupConfig.DeadlineReserve) would not end before it is not made, and
// the last attempt's answer stands.
package retry

import (
	"context"
	"time"
)

// Config is the retries' configuration; see the package documentation.
type Config struct {
	// MaxAttempts is the most attempts a call makes, the first included: 0 or 1 is
	// off, at most 10.
	MaxAttempts int
	// Backoff is the base delay before the first retry; the n-th retry waits a
	// random duration in [0, min(MaxBackoff, Backoff × 2^(n-1))) ("full jitter",
	// so that callers failing together do not retry together). Default 50 ms.
	Backoff time.Duration
	// MaxBackoff caps the backoff before jitter. Default 1 s; it must not be below
	// Backoff.
	MaxBackoff time.Duration
	// MaxRetryAfter is the longest Retry-After honoured: when the failed attempt's
	// error says when to come back (an error in its chain with a RetryAfterDelay
	// method, see command.Error.RetryAfter, such as an httpguard 5xx with a
	// Retry-After header), the retry waits exactly that long instead of the
	// backoff; a longer Retry-After ends the retries (the dependency asked for
	// more time than the call is worth), and the caller's command.Error.RetryAfter
	// still tells it. Default: MaxBackoff.
	MaxRetryAfter time.Duration
	// BudgetRatio caps the retries of the group (all its commands) at this share
	// of its calls over the group's metrics window (command.GroupConfig.Window),
	// plus BudgetMinPerSecond × the window's length in seconds (as Finagle's retry
	// budget and gRPC's retry throttling do): a dependency that fails every call
	// then sees about 1 + BudgetRatio times the callers' load, not MaxAttempts
	// times. The retries are the RETRIED events in the commands' windows (plus the
	// retries admitted and still in their backoff), the calls their attempts less
	// their retries. A retry the budget refuses is not made. It must be in (0, 1].
	// Default 0.2.
	BudgetRatio float64
	// BudgetMinPerSecond is the retry rate always allowed, so that a group with
	// few calls can retry at all. Default 1.
	BudgetMinPerSecond float64
	// NoBudget lifts the budget: every failed attempt of an idempotent command is
	// retried up to MaxAttempts, which multiplies the load on a failing dependency
	// by MaxAttempts. For tests and measurements. The retries made meanwhile are
	// in the windows all the same: a budget restored by Reconfigure counts them.
	NoBudget bool
	// Sleep waits d before a retry, or until ctx ends (then it returns ctx's error
	// and the call ends with the last attempt's answer). Default: a timer. Tests
	// and simulations set it to move a metrics.ManualClock instead.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0, 1) for the jitter. Default
	// math/rand/v2.Float64.
	Rand func() float64
}
