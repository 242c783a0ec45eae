package ratelimit

import (
	"context"
	"math"
	"time"

	"github.com/bulwark-go/bulwark/internal/limiter"
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
type WarmUp limiter.WarmUp

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
	s := limiter.WarmUpSettings{Rate: c.Rate, Burst: c.Burst, ColdFactor: c.ColdFactor, Period: c.Period,
		IdleAfter: c.IdleAfter, Clock: clockOr(c.Clock)}
	return (*WarmUp)(limiter.NewWarmUp(s, refuse)), nil
}

// Admit takes a token, or refuses with a *LimitError whose RetryAfter is
// the time until the next token at the current rate. It ignores ctx (it
// never waits).
func (w *WarmUp) Admit(_ context.Context) error { return (*limiter.WarmUp)(w).Admit() }
