package circuit

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"strconv"
	"time"
)

// RampSchedule selects how the admitted share rises during ramp-up.
type RampSchedule uint8

// The ramp schedules. The zero value is RampLinear.
const (
	// RampLinear raises the share linearly from RampUpFloor to 1 over
	// RampUp.
	RampLinear RampSchedule = iota
	// RampDoubling starts at RampUpFloor (default 1 %) and doubles the
	// share every RampDoublingInterval (default 3 s) until it reaches 1 or
	// RampUp ends: a slow start for a backend that a flood of queued
	// traffic knocked down again and again right after it recovered.
	RampDoubling
)

// String returns "linear" or "doubling".
func (s RampSchedule) String() string {
	switch s {
	case RampLinear:
		return "linear"
	case RampDoubling:
		return "doubling"
	}
	return "ramp(" + strconv.Itoa(int(s)) + ")"
}

// rampDefaults applies the ramp schedule's defaults (see WithDefaults).
func (c Config) rampDefaults() Config {
	switch {
	case c.RampUp <= 0 || c.RampFunc != nil:
	case c.RampSchedule == RampDoubling:
		if c.RampUpFloor == 0 {
			c.RampUpFloor = DefaultRampDoublingFloor
		}
		if c.RampDoublingInterval == 0 {
			c.RampDoublingInterval = DefaultRampDoublingInterval
		}
	case c.RampUpFloor == 0:
		c.RampUpFloor = DefaultRampUpFloor
	}
	return c
}

// validateRamp reports the first invalid ramp schedule field of c, whose
// effective configuration is e.
func (c Config) validateRamp(e Config) error {
	switch {
	case e.RampSchedule > RampDoubling:
		return invalid("RampSchedule %d is not a known schedule", c.RampSchedule)
	case e.RampUp == 0 && (e.RampSchedule != RampLinear || e.RampFunc != nil):
		return invalid("RampSchedule %v or RampFunc is set but RampUp is 0 (ramp-up off)", c.RampSchedule)
	case e.RampDoublingInterval < 0:
		return invalid("RampDoublingInterval %v must not be negative", c.RampDoublingInterval)
	case e.RampSchedule != RampDoubling && e.RampDoublingInterval != 0:
		return invalid("RampDoublingInterval %v is set but RampSchedule is %v", c.RampDoublingInterval, e.RampSchedule)
	case e.RampFunc != nil && e.RampSchedule != RampLinear:
		return invalid("RampFunc is set, so RampSchedule %v must be left zero", c.RampSchedule)
	case e.RampFunc != nil && e.RampUpFloor != 0:
		return invalid("RampUpFloor %v is set but RampFunc gives the schedule", c.RampUpFloor)
	case e.RampFunc != nil:
		if s, err := callRampFunc(e.RampFunc, 0); err != nil {
			return invalid("RampFunc(0): %v", err)
		} else if !inUnit(s) {
			return invalid("RampFunc(0) = %v must be in (0, 1]", s)
		}
	}
	return nil
}

// scheduledShare returns the share the ramp schedule admits elapsed
// (>= 0, < RampUp) after the ramp began; 1 or more means the ramp is over.
func (b *Breaker) scheduledShare(c *settings, elapsed time.Duration) float64 {
	floor := c.RampUpFloor
	switch {
	case c.RampFunc != nil:
		return b.userShare(c, elapsed)
	case c.RampSchedule == RampDoubling:
		return floor * math.Exp2(float64(elapsed/c.RampDoublingInterval))
	}
	return floor + (1-floor)*float64(elapsed)/float64(c.RampUp)
}

// userShare returns RampFunc(elapsed), or 1 (the ramp ends) when it panics
// or returns a share outside (0, 1]; either is logged at Error level.
func (b *Breaker) userShare(c *settings, elapsed time.Duration) float64 {
	s, err := callRampFunc(c.RampFunc, elapsed)
	if err == nil && !inUnit(s) {
		err = fmt.Errorf("share %v is not in (0, 1]", s)
	}
	if err != nil {
		c.Logger.LogAttrs(context.Background(), slog.LevelError, "circuit breaker RampFunc failed; ramp-up ended",
			slog.String("breaker", c.Name), slog.Duration("elapsed", elapsed), slog.Any("error", err))
		return 1
	}
	return s
}

// callRampFunc calls f(elapsed), turning a panic into an error that
// carries the panic value and stack.
func callRampFunc(f func(time.Duration) float64, elapsed time.Duration) (s float64, err error) {
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

// WarmUp starts a warm-up of d from now: outcomes recorded before now+d
// are not counted (neither in the window nor as probe results), so cold
// instances behind the dependency cannot trip the breaker. It replaces any
// warm-up in progress, whether from Config.WarmUp or an earlier call: a
// deploy or service-discovery hook calls it each time new instances come
// in, and WarmUp(0) ends a warm-up at once. It changes no state: an open
// breaker stays open. Snapshot reports WarmingUp and WarmUpLeft. A
// negative d is an error wrapping ErrInvalidConfig, and changes nothing.
//
// It prevents the incident where a deploy sent 20 % of the traffic to cold
// instances, the error ratio reached 61 % and the breaker stayed open for
// 40 minutes.
func (b *Breaker) WarmUp(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: WarmUp %v must not be negative", ErrInvalidConfig, d)
	}
	b.warmEnd.Store(int64(satAdd(b.clock.Now(), d)))
	return nil
}
