package circuit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// ErrInvalidConfig is wrapped by every error that Validate and New return.
var ErrInvalidConfig = errors.New("circuit: invalid config")

// Defaults applied by Config.WithDefaults to zero fields.
const (
	DefaultMinRequests       = 20
	DefaultFailureRatio      = 0.5
	DefaultOpenDuration      = 5 * time.Second
	DefaultHalfOpenProbes    = 1
	DefaultHalfOpenSuccesses = 3
	DefaultRampUpFloor       = 0.1
	// DefaultMaxOpenFactor is MaxOpenDuration / OpenDuration when
	// BackoffMultiplier > 1 and MaxOpenDuration is zero.
	DefaultMaxOpenFactor = 10
	// DefaultHalfOpenWaitFactor is HalfOpenMaxWait / OpenDuration when
	// HalfOpenMaxWait is zero.
	DefaultHalfOpenWaitFactor = 2
	DefaultHalfOpenFailures   = 1
	// DefaultRampDoublingFloor is the share a RampDoubling ramp starts at
	// when RampUpFloor is zero, and DefaultRampDoublingInterval how often
	// it doubles: 1 % doubling every 3 s reaches 100 % after 21 s.
	DefaultRampDoublingFloor    = 0.01
	DefaultRampDoublingInterval = 3 * time.Second
	// DefaultHealthCheckTimeout bounds a health check under
	// HealthCheckManual when HealthCheckTimeout is zero.
	DefaultHealthCheckTimeout = time.Second
)

// maxProbes bounds HalfOpenProbes: the in-flight probe count shares an
// atomic word with the generation.
const maxProbes = math.MaxInt32

// Config configures a Breaker. The zero value of every field means its
// documented default, or "off" for an optional feature; a negative or
// out-of-range value is an error from New, never silently replaced.
type Config struct {
	// Name identifies the breaker in transitions, logs and snapshots.
	Name string

	// Window is the rolling window the breaker judges health over.
	// Default: 10 s in 10 buckets (a zero Length or Buckets takes the
	// default for that field). Old outcomes leave it one bucket at a time.
	Window metrics.Window

	// MinRequests is how many calls (Success+Failure+Timeout) the window
	// must hold before either ratio can trip the breaker. Default 20.
	MinRequests int

	// FailureRatio trips the breaker when (Failure+Timeout) /
	// (Success+Failure+Timeout) in the window reaches it. In (0, 1];
	// default 0.5.
	FailureRatio float64

	// SlowCallDuration turns slow-call detection on: a successful call that
	// took longer than this is slow. Zero: off.
	SlowCallDuration time.Duration

	// SlowCallRatio trips the breaker when slow / (Success+Failure+Timeout)
	// in the window reaches it. Required, in (0, 1], when SlowCallDuration
	// is set; must be zero otherwise.
	SlowCallRatio float64

	// OpenDuration is how long the breaker stays open before it lets probes
	// through. Default 5 s.
	OpenDuration time.Duration

	// BackoffMultiplier multiplies the open duration after each failed
	// half-open trial, up to MaxOpenDuration; closing resets it. 0 or 1: no
	// backoff; otherwise it must be greater than 1.
	BackoffMultiplier float64

	// MaxOpenDuration caps the backed-off open duration. Default:
	// OpenDuration without backoff, 10 × OpenDuration with it. Must not be
	// below OpenDuration.
	MaxOpenDuration time.Duration

	// HalfOpenProbes is the most probe calls in flight at once in the
	// half-open state. Default 1.
	HalfOpenProbes int

	// HalfOpenSuccesses is how many consecutive successful probes close the
	// breaker. Default 3.
	HalfOpenSuccesses int

	// HalfOpenMaxWait bounds how long the half-open state waits for a
	// result while probes are in flight, so that a hung probe cannot keep
	// it stuck: if no probe result (Success, Failure or Timeout) comes back
	// within HalfOpenMaxWait of the first probe's admission, or of the last
	// result while others are still out, the breaker opens again (reason
	// half_open_timeout), and a result that comes later is not counted.
	// Time with no probe in flight does not count: with sparse traffic the
	// breaker stays half-open until enough calls have come (an Ignored
	// probe frees its slot but does not renew the wait). Default:
	// 2 × OpenDuration.
	HalfOpenMaxWait time.Duration

	// RampUp turns ramp-up on: after closing, the share of calls admitted
	// rises from RampUpFloor to 1 over this duration, linearly unless
	// RampSchedule or RampFunc says otherwise. Zero: off.
	RampUp time.Duration

	// RampUpFloor is the share admitted when a ramp-up starts. In (0, 1];
	// default 0.1 when RampUp is set (0.01 with RampDoubling); must be zero
	// otherwise, and with RampFunc.
	RampUpFloor float64

	// WarmUp turns warm-up on: outcomes recorded before the breaker is that
	// old are not counted. Zero: off.
	WarmUp time.Duration

	// Mode is the initial mode. Default Normal.
	Mode Mode

	// Clock tells time. Default metrics.SystemClock(). Tests and simulations
	// inject a *metrics.ManualClock; the breaker never sleeps.
	Clock metrics.Clock

	// OnTransition, if set, is called once per transition, in order, never
	// concurrently with itself, and never while the breaker holds its lock
	// (it may call the breaker's methods). Each transition is applied to
	// the breaker's state (including its probe slots) before it is logged
	// and delivered, so the breaker stays consistent whatever OnTransition
	// does. A panic in it is recovered, per transition, and logged on
	// Logger at Error level with the panic value and stack (attributes
	// breaker, from, to, reason, panic, stack); it never reaches the
	// caller of Allow, Record, SetMode, State or Snapshot, and the
	// transitions after it are still logged and delivered.
	OnTransition func(Transition)

	// Logger receives one Info record per transition, and one Error record
	// per panic in OnTransition. Default slog.Default().
	Logger *slog.Logger

	// HalfOpenFailures is how many consecutive failed probes (failure,
	// timeout, or slow with slow-call detection on) reopen the breaker; a
	// successful probe in between starts the count again (and a failed
	// probe starts the count of successes again). Default 1: any failed
	// probe reopens it. Prevents the flapping seen when one probe fails at
	// the exact moment of recovery and sends the breaker back to open for
	// a whole open duration (a team uses 2).
	HalfOpenFailures int

	// RampSchedule selects how the admitted share rises during ramp-up
	// (RampUp must be set): RampLinear (default) or RampDoubling. With
	// RampFunc set it must be RampLinear (the zero value).
	RampSchedule RampSchedule

	// RampDoublingInterval is how often the share doubles under
	// RampDoubling. Default 3 s with RampDoubling; must be zero otherwise.
	RampDoublingInterval time.Duration

	// RampFunc, if set, is the ramp-up schedule: the share of calls
	// admitted elapsed after closing, in (0, 1]. RampUp must be set and
	// still ends the ramp; the ramp also ends once RampFunc returns 1, and
	// RampUpFloor must be zero. It is called on calls during the ramp (and
	// by Snapshot), concurrently, never with the breaker's lock held, so
	// it may call the breaker's methods; it should be a cheap, pure
	// function of elapsed. Validate calls it once with 0. A panic in it,
	// or a share outside (0, 1] (NaN included), ends the ramp (every call
	// admitted, as without ramp-up: a bug in a schedule must not become
	// an outage) and is logged at Error level.
	RampFunc func(elapsed time.Duration) float64

	// HealthCheck, if set, is called while the breaker is open (never
	// concurrently with itself, with a HealthCheckTimeout context): when
	// it returns nil the breaker turns half-open at once (reason
	// health_check) instead of waiting out the open duration, so a healed
	// dependency is found within about HealthCheckInterval and no user
	// request is spent probing a dead one. It must honour its context: the
	// next check waits for it to return. A panic in it is a failed check,
	// logged at Error level. Call Close to stop the checker.
	HealthCheck func(ctx context.Context) error

	// HealthCheckInterval is how often HealthCheck runs while the breaker
	// is open: first HealthCheckInterval after it opens, then
	// HealthCheckInterval after each failed check returns. It is real
	// time (a timer on one goroutine that exists only while the breaker
	// is open and a check is scheduled), whatever the Clock.
	// HealthCheckManual schedules nothing: CheckHealth runs a check when
	// called (on a virtual clock, or from an operator's hook). Required
	// when HealthCheck is set; must be zero otherwise.
	HealthCheckInterval time.Duration

	// HealthCheckTimeout bounds one health check (its context's
	// deadline). Default: HealthCheckInterval, or
	// DefaultHealthCheckTimeout with HealthCheckManual. Must be zero
	// without HealthCheck.
	HealthCheckTimeout time.Duration
}

// WithDefaults returns c with every zero field that has a default replaced by
// it: the effective configuration. It is the one place defaults are applied.
// Invalid values are left as they are for Validate to report.
func (c Config) WithDefaults() Config {
	c.Window = c.Window.WithDefaults()
	if c.MinRequests == 0 {
		c.MinRequests = DefaultMinRequests
	}
	if c.FailureRatio == 0 {
		c.FailureRatio = DefaultFailureRatio
	}
	if c.OpenDuration == 0 {
		c.OpenDuration = DefaultOpenDuration
	}
	if c.MaxOpenDuration == 0 {
		c.MaxOpenDuration = c.OpenDuration
		if c.BackoffMultiplier > 1 {
			c.MaxOpenDuration = satMul(c.OpenDuration, DefaultMaxOpenFactor)
		}
	}
	if c.HalfOpenProbes == 0 {
		c.HalfOpenProbes = DefaultHalfOpenProbes
	}
	if c.HalfOpenSuccesses == 0 {
		c.HalfOpenSuccesses = DefaultHalfOpenSuccesses
	}
	if c.HalfOpenMaxWait == 0 {
		c.HalfOpenMaxWait = satMul(c.OpenDuration, DefaultHalfOpenWaitFactor)
	}
	if c.HalfOpenFailures == 0 {
		c.HalfOpenFailures = DefaultHalfOpenFailures
	}
	c = c.rampDefaults()
	c = c.healthCheckDefaults()
	if c.Clock == nil {
		c.Clock = metrics.SystemClock()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first invalid field of c (after applying defaults),
// naming the field and its value. The error wraps ErrInvalidConfig.
func (c Config) Validate() error {
	e := c.WithDefaults()
	if err := e.Window.Validate(); err != nil {
		return fmt.Errorf("%w: Window {Length: %v, Buckets: %d}: %w",
			ErrInvalidConfig, c.Window.Length, c.Window.Buckets, err)
	}
	switch {
	case e.MinRequests < 0:
		return invalid("MinRequests %d must not be negative", c.MinRequests)
	case !inUnit(e.FailureRatio):
		return invalid("FailureRatio %v must be in (0, 1]", c.FailureRatio)
	case e.SlowCallDuration < 0:
		return invalid("SlowCallDuration %v must not be negative", c.SlowCallDuration)
	case e.SlowCallDuration > 0 && !inUnit(e.SlowCallRatio):
		return invalid("SlowCallRatio %v must be in (0, 1] when SlowCallDuration is set (%v)",
			c.SlowCallRatio, c.SlowCallDuration)
	case e.SlowCallDuration == 0 && e.SlowCallRatio != 0:
		return invalid("SlowCallRatio %v is set but SlowCallDuration is 0 (slow-call detection off)",
			c.SlowCallRatio)
	case e.OpenDuration < 0:
		return invalid("OpenDuration %v must not be negative", c.OpenDuration)
	case math.IsNaN(e.BackoffMultiplier) || math.IsInf(e.BackoffMultiplier, 0) ||
		e.BackoffMultiplier < 0 || (e.BackoffMultiplier > 0 && e.BackoffMultiplier < 1):
		return invalid("BackoffMultiplier %v must be 0 or 1 (no backoff) or greater than 1", c.BackoffMultiplier)
	case e.MaxOpenDuration < 0:
		return invalid("MaxOpenDuration %v must not be negative", c.MaxOpenDuration)
	case e.MaxOpenDuration < e.OpenDuration:
		return invalid("MaxOpenDuration %v must not be below OpenDuration %v", c.MaxOpenDuration, e.OpenDuration)
	case e.HalfOpenProbes < 0 || e.HalfOpenProbes > maxProbes:
		return invalid("HalfOpenProbes %d must be between 1 and %d", c.HalfOpenProbes, maxProbes)
	case e.HalfOpenSuccesses < 0:
		return invalid("HalfOpenSuccesses %d must not be negative", c.HalfOpenSuccesses)
	case e.HalfOpenMaxWait < 0:
		return invalid("HalfOpenMaxWait %v must not be negative", c.HalfOpenMaxWait)
	case e.RampUp < 0:
		return invalid("RampUp %v must not be negative", c.RampUp)
	case e.RampUp > 0 && e.RampFunc == nil && !inUnit(e.RampUpFloor):
		return invalid("RampUpFloor %v must be in (0, 1]", c.RampUpFloor)
	case e.RampUp == 0 && e.RampUpFloor != 0:
		return invalid("RampUpFloor %v is set but RampUp is 0 (ramp-up off)", c.RampUpFloor)
	case e.WarmUp < 0:
		return invalid("WarmUp %v must not be negative", c.WarmUp)
	case e.Mode > ObserveOnly:
		return invalid("Mode %d is not a known mode", c.Mode)
	case e.HalfOpenFailures < 0:
		return invalid("HalfOpenFailures %d must not be negative", c.HalfOpenFailures)
	}
	if err := c.validateRamp(e); err != nil {
		return err
	}
	return c.validateHealthCheck(e)
}

// invalid returns a configuration error wrapping ErrInvalidConfig.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// inUnit reports whether r lies in (0, 1]; false for NaN.
func inUnit(r float64) bool { return r > 0 && r <= 1 }

// satMul returns d × f, saturating at the largest Duration instead of
// overflowing.
func satMul(d time.Duration, f float64) time.Duration {
	p := float64(d) * f
	if p >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(p)
}

// satAdd returns t + d for d >= 0, saturating at the largest Duration: a
// deadline too far away to overflow into the past.
func satAdd(t, d time.Duration) time.Duration {
	if t > 0 && d > math.MaxInt64-t {
		return math.MaxInt64
	}
	return t + d
}
