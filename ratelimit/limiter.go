package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

var (
	// ErrLimited is matched (errors.Is) by every refusal of a limiter.
	ErrLimited = errors.New("ratelimit: limited")
	// ErrInvalidConfig is wrapped by every configuration error of this
	// package; the message names the field and the value.
	ErrInvalidConfig = errors.New("ratelimit: invalid config")
)

// Limiter admits or refuses one call. Admit returns nil to admit the call,
// or an error matching ErrLimited (a *LimitError) to refuse it; a limiter
// that waits (Pacer) also returns ctx's error when ctx ends first. A refused
// call consumes no quota.
type Limiter interface {
	Admit(ctx context.Context) error
}

// KeyedLimiter admits or refuses one call by its key (a caller, a
// tenant): AdmitKey is Limiter.Admit for the quota of key. PerKey is one.
type KeyedLimiter interface {
	AdmitKey(ctx context.Context, key string) error
}

// LimitError is a limiter's refusal. It matches ErrLimited.
type LimitError struct {
	// RetryAfter is how long until a call could be admitted, as far as the
	// limiter knows now (other calls may take the quota first). Zero when
	// unknown.
	RetryAfter time.Duration
}

// Error returns "ratelimit: limited (retry after 250ms)".
func (e *LimitError) Error() string {
	return fmt.Sprintf("ratelimit: limited (retry after %v)", e.RetryAfter)
}

// Is reports whether target is ErrLimited.
func (e *LimitError) Is(target error) bool { return target == ErrLimited }

// RetryAfterDelay returns RetryAfter: the method command and httpguard look
// for to fill in a Retry-After.
func (e *LimitError) RetryAfterDelay() time.Duration { return e.RetryAfter }

// refuse returns the refusal of a call that could be admitted after
// retryAfter: what the engines of TokenBucket, SlidingWindow and WarmUp
// answer with.
func refuse(retryAfter time.Duration) error { return &LimitError{RetryAfter: retryAfter} }

// invalid returns a configuration error wrapping ErrInvalidConfig.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// clockOr returns c, or the system clock when c is nil.
func clockOr(c metrics.Clock) metrics.Clock {
	if c == nil {
		return metrics.SystemClock()
	}
	return c
}
