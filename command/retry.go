package command

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// The defaults of RetryConfig (its field docs give them).
const (
	defaultRetryBackoff       = 50 * time.Millisecond
	defaultRetryMaxBackoff    = time.Second
	defaultRetryBudgetRatio   = 0.2
	defaultRetryBudgetMinRate = 1.0 // retries per second always allowed
	// maxRetryAttempts bounds RetryConfig.MaxAttempts: more attempts than
	// this is a configuration mistake, never a resilience strategy.
	maxRetryAttempts = 10
)

// Idempotent is implemented by a command that may be run again after a
// failure: Execute retries only such a command, and only when its
// Idempotent method returns true (a command may depend on its request, as
// httpguard's does on the HTTP method). A command without it is never
// retried: a write that half happened must not happen twice.
type Idempotent interface {
	Idempotent() bool
}

// RetryConfig turns on retries in a group (GroupConfig.Retry): a call of an
// Idempotent command whose attempt ended as FAILURE or TIMEOUT is tried
// again, up to MaxAttempts attempts in all, after a backoff, while the
// group's retry budget allows. Its zero value is off.
//
// Each attempt is a real call: it goes through the rate limiters, both
// breakers and the bulkhead again, so a retry storm cannot escape them,
// and it is counted in the command's metrics and in the breakers with its
// own primary outcome; an attempt that is retried also carries the event
// RETRIED (so the metrics count retries as well as attempts). A
// SHORT_CIRCUITED, *_REJECTED, QUEUE_TIMEOUT, RATE_LIMITED, THROTTLED, BAD_REQUEST or
// CANCELLED attempt is never retried: bulwark's own refusals and the
// caller's mistakes or departure are final. The fallback runs once, after
// the last attempt. The caller's deadline bounds
// the whole call: a retry whose backoff (plus GroupConfig.DeadlineReserve)
// would not end before it is not made, and the last attempt's answer
// stands.
type RetryConfig struct {
	// MaxAttempts is the most attempts a call makes, the first included:
	// 0 or 1 is off, at most 10.
	MaxAttempts int
	// Backoff is the base delay before the first retry; the n-th retry
	// waits a random duration in [0, min(MaxBackoff, Backoff × 2^(n-1)))
	// ("full jitter", so that callers failing together do not retry
	// together). Default 50 ms.
	Backoff time.Duration
	// MaxBackoff caps the backoff before jitter. Default 1 s; it must not
	// be below Backoff.
	MaxBackoff time.Duration
	// MaxRetryAfter is the longest Retry-After honoured: when the failed
	// attempt's error says when to come back (a RetryAfterer in its chain,
	// such as an httpguard 5xx with a Retry-After header), the retry waits
	// exactly that long instead of the backoff; a longer Retry-After ends
	// the retries (the dependency asked for more time than the call is
	// worth), and the caller's Error.RetryAfter still tells it. Default:
	// MaxBackoff.
	MaxRetryAfter time.Duration
	// BudgetRatio caps the retries of the group (all its commands) at this
	// share of its calls over the group's metrics Window, plus
	// BudgetMinPerSecond × the window's length in seconds (as Finagle's
	// retry budget and gRPC's retry throttling do): a dependency that fails
	// every call then sees about 1 + BudgetRatio times the callers' load,
	// not MaxAttempts times. The retries are the RETRIED events in the
	// commands' windows (plus the retries admitted and still in their
	// backoff), the calls their attempts less their retries. A retry the
	// budget refuses is not made. It must be in (0, 1]. Default 0.2.
	BudgetRatio float64
	// BudgetMinPerSecond is the retry rate always allowed, so that a group
	// with few calls can retry at all. Default 1.
	BudgetMinPerSecond float64
	// NoBudget lifts the budget: every failed attempt of an idempotent
	// command is retried up to MaxAttempts, which multiplies the load on a
	// failing dependency by MaxAttempts. For tests and measurements. The
	// retries made meanwhile are in the windows all the same: a budget
	// restored by Reconfigure counts them.
	NoBudget bool
	// Sleep waits d before a retry, or until ctx ends (then it returns
	// ctx's error and the call ends with the last attempt's answer).
	// Default: a timer. Tests and simulations set it to move a
	// metrics.ManualClock instead.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0, 1) for the jitter. Default
	// math/rand/v2.Float64.
	Rand func() float64
}

// enabled reports whether c turns retries on.
func (c RetryConfig) enabled() bool { return c.MaxAttempts > 1 }

// withDefaults returns c with its zero fields defaulted, when retries are
// on.
func (c RetryConfig) withDefaults() RetryConfig {
	if !c.enabled() {
		return c
	}
	if c.Backoff == 0 {
		c.Backoff = defaultRetryBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = max(defaultRetryMaxBackoff, c.Backoff)
	}
	if c.MaxRetryAfter == 0 {
		c.MaxRetryAfter = c.MaxBackoff
	}
	if c.BudgetRatio == 0 {
		c.BudgetRatio = defaultRetryBudgetRatio
	}
	if c.BudgetMinPerSecond == 0 {
		c.BudgetMinPerSecond = defaultRetryBudgetMinRate
	}
	if c.Sleep == nil {
		c.Sleep = sleep
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	return c
}

// validate reports the first invalid field of c (defaults applied), named
// as GroupConfig.Retry's.
func (c RetryConfig) validate() error {
	switch {
	case c.MaxAttempts < 0 || c.MaxAttempts > maxRetryAttempts:
		return invalid("Retry.MaxAttempts %d must be between 0 and %d (0 or 1: no retries)", c.MaxAttempts, maxRetryAttempts)
	case !c.enabled():
		return nil
	case c.Backoff < 0:
		return invalid("Retry.Backoff %v must not be negative", c.Backoff)
	case c.MaxBackoff < c.Backoff:
		return invalid("Retry.MaxBackoff %v must not be below Backoff %v", c.MaxBackoff, c.Backoff)
	case c.MaxRetryAfter < 0:
		return invalid("Retry.MaxRetryAfter %v must not be negative", c.MaxRetryAfter)
	case !(c.BudgetRatio > 0 && c.BudgetRatio <= 1):
		return invalid("Retry.BudgetRatio %v must be in (0, 1]", c.BudgetRatio)
	case !(c.BudgetMinPerSecond > 0) || math.IsInf(c.BudgetMinPerSecond, 0):
		return invalid("Retry.BudgetMinPerSecond %v must be a positive number", c.BudgetMinPerSecond)
	}
	return nil
}

// sleep is RetryConfig's default Sleep.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryable reports whether an attempt with primary outcome e may be
// retried: only the dependency's own failures.
func retryable(e metrics.Event) bool {
	return e == metrics.Failure || e == metrics.Timeout
}

// retryDelay returns how long to wait before retry number n (1 for the
// first) of an attempt that failed with err, and false when it must not be
// retried because err's Retry-After exceeds MaxRetryAfter.
func (c *RetryConfig) retryDelay(n int, err error) (time.Duration, bool) {
	if ra := retryAfterOf(err); ra > 0 {
		return ra, ra <= c.MaxRetryAfter
	}
	ceiling := c.MaxBackoff
	if n-1 < 62 && c.Backoff <= c.MaxBackoff>>(n-1) {
		ceiling = c.Backoff << (n - 1)
	}
	return time.Duration(c.Rand() * float64(ceiling)), true
}

// allows reports whether an attempt number n that ended with event e may
// be followed by another, as far as the count and the outcome go: the
// check retry makes before anything that costs (such as converting the
// command to an interface for retryAgain).
func (rc *RetryConfig) allows(n int, e metrics.Event) bool {
	return n < rc.MaxAttempts && retryable(e)
}

// retry is the stage after a failed attempt, before fallback: it reports
// whether the call makes another attempt (RetryConfig), and if so it has
// waited the backoff, recorded the failed attempt (retried) and begun the
// next. A group without Retry pays one load and one test for it.
func (k *commandCall[T, C]) retry() bool {
	rc := k.cs.retry
	if rc == nil || !rc.allows(int(k.attempts), k.r.event) || !k.retryAgain(any(k.cmd), rc) {
		return false
	}
	k.retried()
	return true
}

// retryAgain decides, after a failed attempt which rc.allows, whether to
// make another, and waits for it: it checks the caller's context, the
// command cmd, the delay against the caller's deadline (less the reserve),
// and the group's budget (at the attempt's end), then sleeps. It reports
// whether to go on; when it does, the retry is pending in the budget until
// retried records the attempt.
func (k *call) retryAgain(cmd any, rc *RetryConfig) bool {
	ctx, g := k.ctx, k.g
	if ctx.Err() != nil {
		return false
	}
	if !g.idempotent(cmd) {
		return false
	}
	d, ok := rc.retryDelay(int(k.attempts), k.r.err)
	if !ok {
		return false
	}
	if dl, has := ctx.Deadline(); has && time.Until(dl) <= d+k.cs.reserve {
		return false
	}
	if !g.retries.admit(g, rc, k.now) {
		return false
	}
	if rc.Sleep(ctx, d) != nil {
		g.retries.pending.Add(-1) // not made after all
		return false
	}
	return true
}

// idempotent reports whether cmd may be run again: it implements
// Idempotent and says so. A panic in its Idempotent method judges no (and
// is logged), so that the call still ends and is counted.
func (g *Group) idempotent(cmd any) (ok bool) {
	id, is := cmd.(Idempotent)
	if !is {
		return false
	}
	defer g.recoverHook("Idempotent")
	return id.Idempotent()
}

// retryBudget holds a group's retries to RetryConfig's budget. It reads
// them from the group's commands' windows, where every attempt that is
// retried carries a RETRIED event (so calls = attempts − retries), and adds
// the retries it admitted whose attempt is not recorded yet (still in their
// backoff): failing calls that decide at once then see each other, and a
// burst of failures gets no more retries than the budget allows. Its zero
// value is ready. It takes a lock: it is only on the path of a failed
// attempt of a retrying group.
type retryBudget struct {
	mu sync.Mutex // serialises the budget's decisions
	// pending counts the retries admitted (with or without a budget) whose
	// attempt retried has not recorded yet.
	pending atomic.Int64
}

// admit reports whether the group's budget leaves room for one more retry
// at now, always under NoBudget, and if so counts it as pending. Room
// means fewer retries than BudgetRatio × calls + BudgetMinPerSecond ×
// window seconds, over the group's metrics window.
func (b *retryBudget) admit(g *Group, rc *RetryConfig, now time.Duration) bool {
	if rc.NoBudget {
		b.pending.Add(1)
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var calls, retries int64
	for _, c := range g.commands.Load().names.all() {
		n := c.metrics.CountsOf(now, callEvents)
		calls += Calls(n)
		retries += n[metrics.Retried] + n[metrics.Hedged] // hedges share the budget (HedgeConfig)
	}
	// The attempt that failed is recorded after this decision: it is one
	// more call. The pending retries are recorded after it too: each is one
	// attempt and one retry, one more retry and no more calls.
	calls++
	retries += b.pending.Load()
	allowed := rc.BudgetRatio*float64(calls) + rc.BudgetMinPerSecond*g.metrics.Window().Length.Seconds()
	if float64(retries)+1 > allowed {
		return false
	}
	b.pending.Add(1)
	return true
}

// retried records in the command's metrics the attempt k.attempt, which
// is being retried: its primary outcome (and probe events) and RETRIED: an
// attempt of its own in the windows, which Calls does not count as a call;
// the caller never sees it (no fallback, no EXCEPTION_THROWN). The retry is
// then no longer pending in the group's budget. It begins the next attempt,
// whole and new, at a clock reading taken after the backoff retryAgain
// waited. Only a failed attempt gets here, so a call that succeeds pays
// nothing for retries.
func (k *call) retried() {
	run := metrics.NoLatency
	if k.r.ran {
		run = k.r.run
	}
	k.events.Add(metrics.Retried)
	k.c.metrics.Record(k.now, k.events, run, k.now-k.start)
	k.adapt()
	if k.g.hook != nil {
		k.hookEnd(k.g.hook)
	}
	k.g.retries.pending.Add(-1)
	k.attempts++
	start := k.g.clock.Now()
	k.attempt = attempt{start: start, t0: start, now: start}
}
