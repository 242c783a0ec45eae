package circuit

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/bulwark-go/bulwark/internal/breaker"
	"github.com/bulwark-go/bulwark/metrics"
)

// ErrInvalidConfig is wrapped by every error that Validate and New return.
var ErrInvalidConfig = errors.New("circuit: invalid config")

// The defaults WithDefaults applies to zero fields, as each field's
// documentation states them.
const (
	defaultMinRequests       = 20
	defaultFailureRatio      = 0.5
	defaultOpenDuration      = 5 * time.Second
	defaultMaxOpenFactor     = 10 // OpenMaxDuration / OpenDuration with backoff
	defaultHalfOpenProbes    = 1
	defaultHalfOpenSuccesses = 3
	defaultHalfOpenFailures  = 1
	defaultHalfOpenWait      = 2 // HalfOpenMaxWait / OpenDuration
	defaultRampFloor         = 0.1
	defaultDoublingFloor     = 0.01
)

// Config configures a Breaker, its fields in the order a breaker works:
// when a closed breaker trips (Window to Confidence), how long it stays
// open (the Open fields), the half-open trial that decides whether it
// closes again (the HalfOpen fields), how traffic comes back after it
// closes (the Ramp fields) or after it is created (WarmUp), then how it is
// run. The zero value of every field means its documented default, or
// "off" for an optional feature; a negative or out-of-range value is an
// error from New that names the field (HalfOpenProbes), never silently
// replaced.
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

	// Confidence turns the confidence rule on: the breaker trips when the
	// lower bound of the Wilson score interval of the failure ratio (and
	// of the slow-call ratio) at this confidence reaches FailureRatio
	// (SlowCallRatio), rather than the ratio itself, so a window's noise
	// trips it far less often, most of all a thin window (few calls), at
	// the price of a later trip in a real outage (docs/confidence.md
	// measures both). The interval is two-sided: at 0.95 the bound is 1.96
	// standard errors below the ratio. Health.ErrorBound and SlowBound
	// tell the bounds. In (0, 1); zero: off, the ratios trip as they are.
	// Closing is decided by counts of consecutive probes, not a ratio:
	// Confidence leaves the half-open trial alone.
	Confidence float64

	// Open state: how long the breaker stays open, and how that grows
	// after failed trials.
	//
	// OpenDuration is how long the breaker stays open before it lets
	// probes through. Default 5 s.
	OpenDuration time.Duration
	// OpenBackoff multiplies the open duration after each failed half-open
	// trial, up to OpenMaxDuration; closing resets it. 0 or 1: no backoff;
	// otherwise it must be greater than 1.
	OpenBackoff float64
	// OpenMaxDuration caps the backed-off open duration. Default:
	// OpenDuration without backoff, 10 × OpenDuration with it. Must not be
	// below OpenDuration.
	OpenMaxDuration time.Duration

	// Half-open state: the trial that decides whether the breaker closes
	// again.
	//
	// HalfOpenProbes is the most probe calls in flight at once. Default 1.
	HalfOpenProbes int
	// HalfOpenSuccesses is how many consecutive successful probes close
	// the breaker. Default 3.
	HalfOpenSuccesses int
	// HalfOpenFailures is how many consecutive failed probes (failure,
	// timeout, or slow with slow-call detection on) reopen the breaker; a
	// successful probe in between starts the count again (and a failed
	// probe starts the count of successes again). Default 1: any failed
	// probe reopens it. Above 1, one probe that fails at the moment of
	// recovery no longer reopens the breaker for a whole open duration
	// (docs/policies.md).
	HalfOpenFailures int
	// HalfOpenMaxWait bounds how long the half-open state waits for a
	// result while probes are in flight, so that a hung probe cannot keep
	// it stuck: if no probe result (Success, Failure or Timeout) comes
	// back within HalfOpenMaxWait of the first probe's admission, or of
	// the last result while others are still out, the breaker opens again
	// (reason half_open_timeout), and a result that comes later is not
	// counted. Time with no probe in flight does not count: with sparse
	// traffic the breaker stays half-open until enough calls have come (a
	// probe whose outcome is not counted frees its slot but does not renew
	// the wait). Default: 2 × OpenDuration.
	HalfOpenMaxWait time.Duration

	// Ramp-up: how traffic comes back after the breaker closes. With
	// RampDuration set, the share of calls admitted rises to 1 over
	// RampDuration; the others are refused (ErrOpen, "shed during
	// ramp-up"). Default: off (all traffic at once).
	//
	// RampDuration turns ramp-up on and ends it: the share is 1 from then
	// on. Zero: off.
	RampDuration time.Duration
	// RampFloor is the share admitted when a ramp-up starts. In (0, 1];
	// default 0.1 (0.01 with RampDoubling) when RampDuration is set; must
	// be zero otherwise, and with RampFunc.
	RampFloor float64
	// RampDoubling, if set, doubles the share every RampDoubling instead
	// of raising it linearly: 1 % doubling every 3 s reaches 100 % after
	// 21 s. Must be zero without RampDuration, and with RampFunc.
	RampDoubling time.Duration
	// RampFunc, if set, is the schedule: the share of calls admitted
	// elapsed after closing, in (0, 1]. RampDuration still ends the ramp;
	// it also ends once RampFunc returns 1. It is called on calls during
	// the ramp (and by Snapshot), concurrently, never with the breaker's
	// lock held, so it may call the breaker's methods; it should be a
	// cheap, pure function of elapsed. Validate calls it once with 0. A
	// panic in it, or a share outside (0, 1] (NaN included), ends the ramp
	// (every call admitted, as without ramp-up: a bug in a schedule must
	// not become an outage) and is logged at Error level.
	RampFunc func(elapsed time.Duration) float64

	// WarmUp turns warm-up on: outcomes recorded before the breaker is that
	// old are not counted, so cold caches cannot trip it. Zero: off.
	WarmUp time.Duration

	// Mode is the initial mode. Default Normal.
	Mode Mode

	// Clock tells time. Default metrics.SystemClock(). Tests and simulations
	// inject a *metrics.ManualClock; the breaker never sleeps.
	Clock metrics.Clock

	// Logger receives one Info record per transition, and one Error record
	// per panic in OnTransition, an observer or RampFunc (and a health
	// check's: package circuit/healthcheck).
	// Default slog.Default().
	Logger *slog.Logger

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
}

// withDefaults returns c with every zero field that has a default replaced
// by it: the effective configuration. It is the one place defaults are
// applied. Invalid values are left as they are for Validate to report.
func (c Config) withDefaults() Config {
	c.Window = c.Window.WithDefaults()
	if c.MinRequests == 0 {
		c.MinRequests = defaultMinRequests
	}
	if c.FailureRatio == 0 {
		c.FailureRatio = defaultFailureRatio
	}
	if c.OpenDuration == 0 {
		c.OpenDuration = defaultOpenDuration
	}
	if c.OpenMaxDuration == 0 {
		c.OpenMaxDuration = c.OpenDuration
		if c.OpenBackoff > 1 {
			c.OpenMaxDuration = breaker.SatMul(c.OpenDuration, defaultMaxOpenFactor)
		}
	}
	if c.HalfOpenProbes == 0 {
		c.HalfOpenProbes = defaultHalfOpenProbes
	}
	if c.HalfOpenSuccesses == 0 {
		c.HalfOpenSuccesses = defaultHalfOpenSuccesses
	}
	if c.HalfOpenFailures == 0 {
		c.HalfOpenFailures = defaultHalfOpenFailures
	}
	if c.HalfOpenMaxWait == 0 {
		c.HalfOpenMaxWait = breaker.SatMul(c.OpenDuration, defaultHalfOpenWait)
	}
	if c.RampDuration > 0 && c.RampFunc == nil && c.RampFloor == 0 {
		c.RampFloor = defaultRampFloor
		if c.RampDoubling > 0 {
			c.RampFloor = defaultDoublingFloor
		}
	}
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
	e := c.withDefaults()
	if err := e.Window.Validate(); err != nil {
		return fmt.Errorf("%w: Window {Length: %v, Buckets: %d}: %w",
			ErrInvalidConfig, c.Window.Length, c.Window.Buckets, err)
	}
	switch {
	case e.MinRequests < 0:
		return invalid("MinRequests %d must not be negative", c.MinRequests)
	case !breaker.InUnit(e.FailureRatio):
		return invalid("FailureRatio %v must be in (0, 1]", c.FailureRatio)
	case e.SlowCallDuration < 0:
		return invalid("SlowCallDuration %v must not be negative", c.SlowCallDuration)
	case e.SlowCallDuration > 0 && !breaker.InUnit(e.SlowCallRatio):
		return invalid("SlowCallRatio %v must be in (0, 1] when SlowCallDuration is set (%v)",
			c.SlowCallRatio, c.SlowCallDuration)
	case e.SlowCallDuration == 0 && e.SlowCallRatio != 0:
		return invalid("SlowCallRatio %v is set but SlowCallDuration is 0 (slow-call detection off)",
			c.SlowCallRatio)
	case !(e.Confidence >= 0 && e.Confidence < 1):
		return invalid("Confidence %v must be in (0, 1), or 0 (off)", c.Confidence)
	}
	for _, check := range [...]func(Config) error{c.validateOpen, c.validateHalfOpen, c.validateRamp} {
		if err := check(e); err != nil {
			return err
		}
	}
	switch {
	case e.WarmUp < 0:
		return invalid("WarmUp %v must not be negative", c.WarmUp)
	case e.Mode > ObserveOnly:
		return invalid("Mode %d is not a known mode", c.Mode)
	}
	return nil
}

// validateOpen reports the first invalid Open field of c, a config whose
// effective form is e.
func (c Config) validateOpen(e Config) error {
	switch {
	case e.OpenDuration < 0:
		return invalid("OpenDuration %v must not be negative", c.OpenDuration)
	case math.IsNaN(e.OpenBackoff) || math.IsInf(e.OpenBackoff, 0) || e.OpenBackoff < 0 || (e.OpenBackoff > 0 && e.OpenBackoff < 1):
		return invalid("OpenBackoff %v must be 0 or 1 (no backoff) or greater than 1", c.OpenBackoff)
	case e.OpenMaxDuration < 0:
		return invalid("OpenMaxDuration %v must not be negative", c.OpenMaxDuration)
	case e.OpenMaxDuration < e.OpenDuration:
		return invalid("OpenMaxDuration %v must not be below OpenDuration %v", c.OpenMaxDuration, e.OpenDuration)
	}
	return nil
}

// validateHalfOpen reports the first invalid HalfOpen field of c, a config
// whose effective form is e.
func (c Config) validateHalfOpen(e Config) error {
	switch {
	case e.HalfOpenProbes < 0 || e.HalfOpenProbes > breaker.MaxProbes:
		return invalid("HalfOpenProbes %d must be between 1 and %d", c.HalfOpenProbes, breaker.MaxProbes)
	case e.HalfOpenSuccesses < 0:
		return invalid("HalfOpenSuccesses %d must not be negative", c.HalfOpenSuccesses)
	case e.HalfOpenFailures < 0:
		return invalid("HalfOpenFailures %d must not be negative", c.HalfOpenFailures)
	case e.HalfOpenMaxWait < 0:
		return invalid("HalfOpenMaxWait %v must not be negative", c.HalfOpenMaxWait)
	}
	return nil
}

// validateRamp reports the first invalid Ramp field of c, a config whose
// effective form is e.
func (c Config) validateRamp(e Config) error {
	switch {
	case e.RampDuration < 0:
		return invalid("RampDuration %v must not be negative", c.RampDuration)
	case e.RampDuration == 0 && e.RampFloor != 0:
		return invalid("RampFloor %v is set but RampDuration is 0 (ramp-up off)", c.RampFloor)
	case e.RampDuration == 0 && (e.RampDoubling != 0 || e.RampFunc != nil):
		return invalid("RampDoubling %v or RampFunc is set but RampDuration is 0 (ramp-up off)", c.RampDoubling)
	case e.RampDoubling < 0:
		return invalid("RampDoubling %v must not be negative", c.RampDoubling)
	case e.RampFunc != nil && e.RampDoubling != 0:
		return invalid("RampFunc is set, so RampDoubling %v must be left zero", c.RampDoubling)
	case e.RampFunc != nil && e.RampFloor != 0:
		return invalid("RampFloor %v is set but RampFunc gives the schedule", c.RampFloor)
	case e.RampFunc == nil && e.RampDuration > 0 && !breaker.InUnit(e.RampFloor):
		return invalid("RampFloor %v must be in (0, 1]", c.RampFloor)
	case e.RampFunc != nil:
		if s, err := breaker.CallRampFunc(e.RampFunc, 0); err != nil {
			return invalid("RampFunc(0): %v", err)
		} else if !breaker.InUnit(s) {
			return invalid("RampFunc(0) = %v must be in (0, 1]", s)
		}
	}
	return nil
}

// source is a Config kept whole in the engine's Settings.
type source struct{ cfg Config }

// CheckReplacement reports whether Breaker.Reconfigure would accept next, a
// Config, in place of s.
func (s *source) CheckReplacement(next any) error {
	_, err := s.cfg.replacement(next.(Config))
	return err
}

// invalid returns a configuration error wrapping ErrInvalidConfig.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// settings returns what the engine runs on for e, an effective, valid
// configuration: the same values, with e kept (one copy, as a source) for
// Breaker.Config and CheckReconfigure, and OnTransition handed the public
// form of each transition.
func (e Config) settings() breaker.Settings {
	s := breaker.Settings{
		Name:              e.Name,
		Window:            e.Window,
		MinRequests:       e.MinRequests,
		FailureRatio:      e.FailureRatio,
		SlowCallDuration:  e.SlowCallDuration,
		SlowCallRatio:     e.SlowCallRatio,
		Confidence:        e.Confidence,
		OpenDuration:      e.OpenDuration,
		Backoff:           max(e.OpenBackoff, 1),
		MaxOpenDuration:   e.OpenMaxDuration,
		HalfOpenProbes:    e.HalfOpenProbes,
		HalfOpenSuccesses: e.HalfOpenSuccesses,
		HalfOpenFailures:  e.HalfOpenFailures,
		HalfOpenMaxWait:   e.HalfOpenMaxWait,
		RampUp:            e.RampDuration,
		RampFloor:         e.RampFloor,
		RampDoubling:      e.RampDoubling,
		RampFunc:          e.RampFunc,
		WarmUp:            e.WarmUp,
		Mode:              breaker.Mode(e.Mode),
		Clock:             e.Clock,
		Logger:            e.Logger,
		Config:            &source{e},
	}
	if f := e.OnTransition; f != nil {
		s.OnTransition = func(t breaker.Transition) { f(transitionOf(t)) }
	}
	return s
}
