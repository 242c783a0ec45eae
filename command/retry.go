package command

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/metrics"
)

// The defaults of retry.Config (its field docs give them).
const (
	defaultRetryBackoff       = 50 * time.Millisecond
	defaultRetryMaxBackoff    = time.Second
	defaultRetryBudgetRatio   = 0.2
	defaultRetryBudgetMinRate = 1.0 // retries per second always allowed
	// maxRetryAttempts bounds retry.Config.MaxAttempts: more attempts than
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

// retryOn reports whether c turns retries on.
func retryOn(c retry.Config) bool { return c.MaxAttempts > 1 }

// retryDefaults returns c with its zero fields defaulted, when retries are
// on.
func retryDefaults(c retry.Config) retry.Config {
	if !retryOn(c) {
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

// validateRetry reports the first invalid field of c (defaults applied),
// named as GroupConfig.Retry's.
func validateRetry(c retry.Config) error {
	switch {
	case c.MaxAttempts < 0 || c.MaxAttempts > maxRetryAttempts:
		return invalid("Retry.MaxAttempts %d must be between 0 and %d (0 or 1: no retries)", c.MaxAttempts, maxRetryAttempts)
	case !retryOn(c):
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

// sleep is retry.Config's default Sleep.
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
func retryDelay(c *retry.Config, n int, err error) (time.Duration, bool) {
	if ra := retryAfterOf(err); ra > 0 {
		return ra, ra <= c.MaxRetryAfter
	}
	ceiling := c.MaxBackoff
	if n-1 < 62 && c.Backoff <= c.MaxBackoff>>(n-1) {
		ceiling = c.Backoff << (n - 1)
	}
	return time.Duration(c.Rand() * float64(ceiling)), true
}

// retryAllows reports whether an attempt number n that ended with event e may
// be followed by another, as far as the count and the outcome go: the
// check retry makes before anything that costs (such as converting the
// command to an interface for retryAgain).
func retryAllows(rc *retry.Config, n int, e metrics.Event) bool {
	return n < rc.MaxAttempts && retryable(e)
}

// retry is the stage after a failed attempt, before fallback: it reports
// whether the call makes another attempt (package retry), and if so it has
// waited the backoff, recorded the failed attempt (retried) and begun the
// next. A group without Retry pays one load and one test for it.
func (k *commandCall[T, C]) retry() bool {
	rc := k.cs.retry
	if rc == nil || !retryAllows(rc, int(k.attempts), k.r.event) || !k.retryAgain(any(k.cmd), rc) {
		return false
	}
	k.retried()
	return true
}

// retryAgain decides, after a failed attempt which retryAllows, whether to
// make another, and waits for it: it checks the caller's context, the
// command cmd, the delay against the caller's deadline (less the reserve),
// and the group's budget (at the attempt's end), then sleeps. It reports
// whether to go on; when it does, the retry is pending in the budget until
// retried records the attempt.
func (k *call) retryAgain(cmd any, rc *retry.Config) bool {
	ctx, g := k.ctx, k.g
	if ctx.Err() != nil {
		return false
	}
	if !g.idempotent(cmd) {
		return false
	}
	d, ok := retryDelay(rc, int(k.attempts), k.r.err)
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

// retryBudget holds a group's retries to retry.Config's budget. It reads
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
func (b *retryBudget) admit(g *Group, rc *retry.Config, now time.Duration) bool {
	if rc.NoBudget {
		b.pending.Add(1)
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var calls, retries int64
	for _, c := range g.commands.Load().names.all() {
		n := c.metrics.CountsOf(now, metrics.CallEvents)
		calls += n.Calls()
		retries += n[metrics.Retried] + n[metrics.Hedged] // hedges share the budget (hedge.Config)
	}
	// The attempt that failed is recorded after this decision: it is one
	// more call. The pending retries are recorded after it too: each is one
	// attempt and one retry, one more retry and no more calls.
	calls++
	retries += b.pending.Load()
	allowed := rc.BudgetRatio*float64(calls) + rc.BudgetMinPerSecond*g.peak.Window().Length.Seconds()
	if float64(retries)+1 > allowed {
		return false
	}
	b.pending.Add(1)
	return true
}

// retried records in the command's metrics the attempt k.attempt, which
// is being retried: its primary outcome (and probe events) and RETRIED: an
// attempt of its own in the windows, which metrics.Counts.Calls does not
// count as a call; the caller never sees it (no fallback, no
// EXCEPTION_THROWN). The retry is then no longer pending in the group's
// budget. It begins the next attempt,
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
