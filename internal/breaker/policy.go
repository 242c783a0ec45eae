package breaker

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"time"
)

// scheduledShare returns the share the ramp schedule admits elapsed
// (>= 0, < RampUp) after the ramp began; 1 or more means the ramp is over.
func (b *Breaker) scheduledShare(c *settings, elapsed time.Duration) float64 {
	floor := c.RampFloor
	switch {
	case c.RampFunc != nil:
		return b.userShare(c, elapsed)
	case c.RampDoubling > 0:
		return floor * math.Exp2(float64(elapsed/c.RampDoubling))
	}
	return floor + (1-floor)*float64(elapsed)/float64(c.RampUp)
}

// userShare returns RampFunc(elapsed), or 1 (the ramp ends) when it panics
// or returns a share outside (0, 1]; either is logged at Error level.
func (b *Breaker) userShare(c *settings, elapsed time.Duration) float64 {
	s, err := CallRampFunc(c.RampFunc, elapsed)
	if err == nil && !InUnit(s) {
		err = fmt.Errorf("share %v is not in (0, 1]", s)
	}
	if err != nil {
		c.Logger.LogAttrs(context.Background(), slog.LevelError, "circuit breaker RampFunc failed; ramp-up ended",
			slog.String("breaker", c.Name), slog.Duration("elapsed", elapsed), slog.Any("error", err))
		return 1
	}
	return s
}

// CallRampFunc calls f(elapsed), turning a panic into an error that
// carries the panic value and stack.
func CallRampFunc(f func(time.Duration) float64, elapsed time.Duration) (s float64, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
		}
	}()
	return f(elapsed), nil
}

// probeFailedLocked counts a failed probe and reports whether it is the
// HalfOpenFailures-th in a row (of settings c), which reopens the breaker. It ends the run
// of successes. b.mu must be held.
func (b *Breaker) probeFailedLocked(c *settings) bool {
	b.successes = 0
	b.failures++
	return b.failures >= c.HalfOpenFailures
}

// probeSucceededLocked counts a successful probe and reports whether it is
// the HalfOpenSuccesses-th in a row, which closes the breaker. It ends the
// run of failures. b.mu must be held.
func (b *Breaker) probeSucceededLocked(c *settings) bool {
	b.failures = 0
	b.successes++
	return b.successes >= c.HalfOpenSuccesses
}

// WarmUp starts a warm-up of d >= 0 from now (see circuit.Breaker.WarmUp):
// outcomes recorded before now+d are not counted.
func (b *Breaker) WarmUp(d time.Duration) {
	b.warmEnd.Store(int64(satAdd(b.clock.Now(), d)))
}

// InUnit reports whether r lies in (0, 1]; false for NaN.
func InUnit(r float64) bool { return r > 0 && r <= 1 }
