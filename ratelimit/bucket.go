package ratelimit

import (
	"context"
	"math"
	"time"

	"github.com/bulwark-go/bulwark/internal/limiter"
	"github.com/bulwark-go/bulwark/metrics"
)

// TokenBucketConfig configures a TokenBucket.
type TokenBucketConfig struct {
	// Rate is how many tokens a second the bucket gains (the sustained
	// call rate). Required: positive and finite. The bucket works with the
	// interval between two tokens in whole nanoseconds (1 s / Rate, rounded
	// down, at least 1 ns): Rate 3 is one token per 333,333,333 ns. The
	// bucket must fill within MaxFillTime (Burst intervals at most 73
	// years), so a rate below about 4.3e-10 a second is refused.
	Rate float64
	// Burst is the bucket's capacity: how many calls may go at once after a
	// quiet spell. Default 1.
	Burst int
	// Clock tells the time. Default metrics.SystemClock().
	Clock metrics.Clock
}

// MaxFillTime is the longest a TokenBucket may take to fill (Burst tokens
// at Rate): about 73 years (2^61 ns). The bucket counts in nanoseconds on
// one int64, which a longer fill time would overflow.
const MaxFillTime = time.Duration(1 << 61)

// Validate reports the first invalid field of c; the error wraps
// ErrInvalidConfig.
func (c TokenBucketConfig) Validate() error {
	switch {
	case !(c.Rate > 0) || math.IsInf(c.Rate, 0):
		return invalid("TokenBucketConfig.Rate %v must be positive and finite", c.Rate)
	case c.Burst < 0:
		return invalid("TokenBucketConfig.Burst %d must not be negative", c.Burst)
	}
	if fill := float64(max(c.Burst, 1)) * tokenInterval(c.Rate); fill > float64(MaxFillTime) {
		return invalid("TokenBucketConfig.Rate %v with Burst %d takes %.3g years to fill the bucket: more than MaxFillTime (73 years)",
			c.Rate, c.Burst, fill/float64(365.25*24*time.Hour))
	}
	return nil
}

// tokenInterval returns the nanoseconds between two tokens at rate: 1 s /
// rate, rounded down, at least 1.
func tokenInterval(rate float64) float64 {
	return max(1, math.Floor(float64(time.Second)/rate))
}

// TokenBucket admits calls at a steady Rate with bursts up to Burst. It
// starts full: from then on, over any span t it admits at most Burst +
// Rate×t calls, and exactly that many when a call is waiting whenever a
// token arrives (a full bucket cannot hold the tokens that arrive while
// nobody calls). It never waits: a call that finds no token is refused with
// the time until the next token.
//
// It is the generic cell rate algorithm: one atomic word, the instant the
// bucket would next be empty, moved by compare-and-swap, so Admit takes no
// lock.
type TokenBucket limiter.Bucket

// NewTokenBucket returns a full token bucket, or an error wrapping
// ErrInvalidConfig.
func NewTokenBucket(c TokenBucketConfig) (*TokenBucket, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Burst == 0 {
		c.Burst = 1
	}
	// Validate bounds Burst × interval by MaxFillTime: neither tau nor the
	// instants tat reaches (now + tau + interval) overflow.
	return (*TokenBucket)(limiter.NewBucket(int64(tokenInterval(c.Rate)), c.Burst, clockOr(c.Clock), refuse)), nil
}

// Admit takes a token, or refuses with a *LimitError whose RetryAfter is
// the time until the next token. It ignores ctx (it never waits).
func (b *TokenBucket) Admit(_ context.Context) error { return (*limiter.Bucket)(b).Admit() }
