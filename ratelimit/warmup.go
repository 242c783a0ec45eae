package ratelimit

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// Default of WarmUpConfig.
const DefaultColdFactor = 1.0 / 3 // start at a third of the rate, as Guava's SmoothWarmingUp

// WarmUpConfig configures a WarmUp limiter.
type WarmUpConfig struct {
	// Rate is the full rate, calls a second, once warm. Required: positive
	// and finite.
	Rate float64
	// Burst is the bucket's capacity once warm. Default 1.
	Burst int
	// ColdFactor is the fraction of Rate (and of Burst) allowed when cold,
	// in (0, 1]. Default DefaultColdFactor.
	ColdFactor float64
	// Period is how long the rate takes to rise, linearly, from
	// ColdFactor×Rate to Rate. Required: positive.
	Period time.Duration
	// IdleAfter is how long without an admitted call makes the limiter
	// cold again. Default Period.
	IdleAfter time.Duration
	// Clock tells the time. Default metrics.SystemClock().
	Clock metrics.Clock
}

// Validate reports the first invalid field of c; the error wraps
// ErrInvalidConfig.
func (c WarmUpConfig) Validate() error {
	switch {
	case !(c.Rate > 0) || math.IsInf(c.Rate, 0):
		return invalid("WarmUpConfig.Rate %v must be positive and finite", c.Rate)
	case c.Burst < 0:
		return invalid("WarmUpConfig.Burst %d must not be negative", c.Burst)
	case c.ColdFactor < 0 || c.ColdFactor > 1 || math.IsNaN(c.ColdFactor):
		return invalid("WarmUpConfig.ColdFactor %v must be in (0, 1] (0: the default %.3f)", c.ColdFactor, DefaultColdFactor)
	case c.Period <= 0:
		return invalid("WarmUpConfig.Period %v must be positive", c.Period)
	case c.IdleAfter < 0:
		return invalid("WarmUpConfig.IdleAfter %v must not be negative", c.IdleAfter)
	}
	return nil
}

// WarmUp is a token bucket whose rate rises linearly from ColdFactor×Rate
// to Rate over Period, starting at its first call and again at the first
// call after IdleAfter without an admitted call: a cold dependency (empty
// caches, a just-started process, a connection pool still to fill) is not
// hit by the full rate at once. A cold bucket holds at most
// ColdFactor×Burst tokens (at least 1). Over a span it admits at most the
// integral of its rate over the span plus the tokens it held.
type WarmUp struct {
	mu        sync.Mutex
	cfg       WarmUpConfig // with defaults
	tokens    float64
	last      time.Duration // tokens are as of last (the last admission)
	warmFrom  time.Duration // start of the current warm-up
	lastAdmit time.Duration
	started   bool
}

// NewWarmUp returns a cold WarmUp limiter, or an error wrapping
// ErrInvalidConfig.
func NewWarmUp(c WarmUpConfig) (*WarmUp, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Burst == 0 {
		c.Burst = 1
	}
	if c.ColdFactor == 0 {
		c.ColdFactor = DefaultColdFactor
	}
	if c.IdleAfter == 0 {
		c.IdleAfter = c.Period
	}
	c.Clock = clockOr(c.Clock)
	return &WarmUp{cfg: c}, nil
}

// Admit takes a token, or refuses with a *LimitError whose RetryAfter is
// the time until the next token at the current rate. It ignores ctx (it
// never waits).
func (w *WarmUp) Admit(_ context.Context) error {
	return w.AdmitAt(w.cfg.Clock.Now())
}

// NeverWaits returns true: Admit admits or refuses at once. Callers such
// as command.Execute use it to skip a clock reading (command.NonWaiting).
func (w *WarmUp) NeverWaits() bool { return true }

// Clock returns the limiter's clock, the one AdmitAt's instant is read on.
func (w *WarmUp) Clock() metrics.Clock { return w.cfg.Clock }

// AdmitAt is Admit at instant now, a reading of the limiter's Clock taken
// for this call, for a caller that has just read that clock (see
// command.ClockedLimiter): the limiter does not read it again.
func (w *WarmUp) AdmitAt(now time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started || now-w.lastAdmit >= w.cfg.IdleAfter {
		w.cool(now)
	}
	// The tokens gained since the last admission, in one step (summing the
	// gains of every refused call would add up rounding errors).
	tokens := w.tokens
	if now > w.last {
		tokens = min(tokens+w.gained(w.last, now), float64(w.cfg.Burst))
	}
	if tokens >= 1-epsilon {
		w.tokens, w.last, w.lastAdmit = tokens-1, max(now, w.last), now
		return nil
	}
	return &LimitError{RetryAfter: time.Duration(math.Ceil((1 - tokens) / w.rateAt(now) * float64(time.Second)))}
}

// cool restarts the warm-up at now, with at most a cold bucket's tokens.
func (w *WarmUp) cool(now time.Duration) {
	cold := max(1, math.Floor(w.cfg.ColdFactor*float64(w.cfg.Burst)))
	if !w.started || w.tokens > cold {
		w.tokens = cold
	}
	w.started, w.warmFrom, w.last, w.lastAdmit = true, now, now, now
}

// rateAt returns the rate, in calls a second, at instant now.
func (w *WarmUp) rateAt(now time.Duration) float64 {
	f := min(1, max(0, float64(now-w.warmFrom)/float64(w.cfg.Period)))
	return w.cfg.Rate * (w.cfg.ColdFactor + (1-w.cfg.ColdFactor)*f)
}

// epsilon absorbs the rounding of gained: a token due at an instant must
// not be missed by 1e-15 and arrive a call later.
const epsilon = 1e-9

// gained returns the tokens the rate adds from a to b: its integral.
func (w *WarmUp) gained(a, b time.Duration) float64 {
	c := w.cfg.ColdFactor
	secs := (b - a).Seconds()
	return w.cfg.Rate * (c*secs + (1-c)*(w.ramp(b)-w.ramp(a)))
}

// ramp is an antiderivative, in seconds, of the warm-up's progress (0 to 1,
// linear over Period from warmFrom).
func (w *WarmUp) ramp(t time.Duration) float64 {
	u, p := (t - w.warmFrom).Seconds(), w.cfg.Period.Seconds()
	switch {
	case u <= 0:
		return 0
	case u < p:
		return u * u / (2 * p)
	}
	return p/2 + (u - p)
}
