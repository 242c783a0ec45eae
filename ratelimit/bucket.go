package ratelimit

import (
	"context"
	"math"
	"time"

	"golang.org/x/time/rate"

	"github.com/bulwark-go/bulwark/metrics"
)

// TokenBucketConfig configures a TokenBucket.
type TokenBucketConfig struct {
	// Rate is how many tokens a second the bucket gains (the sustained
	// call rate). Required: must be positive and finite.
	Rate float64
	// Burst is the bucket's capacity: how many calls may go at once after a
	// quiet spell. Default 1.
	Burst int
	// Clock tells the time. Default metrics.SystemClock().
	Clock metrics.Clock
}

// Validate reports the first invalid field of c; the error wraps
// ErrInvalidConfig.
func (c TokenBucketConfig) Validate() error {
	switch {
	case !(c.Rate > 0) || math.IsInf(c.Rate, 0):
		return invalid("TokenBucketConfig.Rate %v must be positive and finite", c.Rate)
	case c.Burst < 0:
		return invalid("TokenBucketConfig.Burst %d must not be negative", c.Burst)
	}
	return nil
}

// TokenBucket admits calls at a steady Rate with bursts up to Burst. It
// starts full: from then on, over any span t it admits at most Burst +
// Rate×t calls, and exactly that many when a call is waiting whenever a
// token arrives (a full bucket cannot hold the tokens that arrive while
// nobody calls). It never waits: a call that finds no token is refused with
// the time until the next token.
type TokenBucket struct {
	lim   *rate.Limiter
	rate  float64
	clock metrics.Clock
}

// NewTokenBucket returns a full token bucket, or an error wrapping
// ErrInvalidConfig.
func NewTokenBucket(c TokenBucketConfig) (*TokenBucket, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Burst == 0 {
		c.Burst = 1
	}
	return &TokenBucket{lim: rate.NewLimiter(rate.Limit(c.Rate), c.Burst), rate: c.Rate, clock: clockOr(c.Clock)}, nil
}

// Admit takes a token, or refuses with a *LimitError whose RetryAfter is
// the time until the next token. It ignores ctx (it never waits).
func (b *TokenBucket) Admit(_ context.Context) error {
	return b.admitAt(b.clock.Now())
}

func (b *TokenBucket) admitAt(now time.Duration) error {
	at := instant(now)
	if b.lim.AllowN(at, 1) {
		return nil
	}
	missing := 1 - b.lim.TokensAt(at)
	return &LimitError{RetryAfter: time.Duration(math.Ceil(missing / b.rate * float64(time.Second)))}
}
