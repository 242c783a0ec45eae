package metrics

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidConfig is wrapped by every configuration error of this package.
var ErrInvalidConfig = errors.New("metrics: invalid config")

// Window is the span a rolling ring covers and how many buckets divide it.
// The bucket width (Length / Buckets) is the granularity at which old data
// leaves the window.
type Window struct {
	Length  time.Duration
	Buckets int
}

// DefaultWindow returns Hystrix's default window: 10 s in 10 buckets.
func DefaultWindow() Window { return Window{Length: 10 * time.Second, Buckets: 10} }

// WithDefaults returns w with a zero Length or Buckets replaced by
// DefaultWindow's, field by field. Other values are left for Validate.
func (w Window) WithDefaults() Window {
	def := DefaultWindow()
	if w.Length == 0 {
		w.Length = def.Length
	}
	if w.Buckets == 0 {
		w.Buckets = def.Buckets
	}
	return w
}

// Limits on a Window.
const (
	MaxBuckets     = 1000             // more buckets would make every read slow
	MinBucketWidth = time.Millisecond // narrower buckets rotate on nearly every call
)

// Validate reports whether the window can be used: a positive length, between
// 1 and MaxBuckets buckets, a length that divides evenly into buckets, and
// buckets at least MinBucketWidth wide. The error wraps ErrInvalidConfig.
func (w Window) Validate() error {
	switch {
	case w.Length <= 0:
		return fmt.Errorf("%w: window length %v must be positive", ErrInvalidConfig, w.Length)
	case w.Buckets < 1 || w.Buckets > MaxBuckets:
		return fmt.Errorf("%w: window buckets %d must be between 1 and %d", ErrInvalidConfig, w.Buckets, MaxBuckets)
	case w.Length%time.Duration(w.Buckets) != 0:
		return fmt.Errorf("%w: window length %v is not a whole multiple of %d buckets", ErrInvalidConfig, w.Length, w.Buckets)
	case w.BucketWidth() < MinBucketWidth:
		return fmt.Errorf("%w: window bucket width %v is below %v", ErrInvalidConfig, w.BucketWidth(), MinBucketWidth)
	}
	return nil
}

// BucketWidth returns Length / Buckets.
func (w Window) BucketWidth() time.Duration {
	if w.Buckets <= 0 {
		return 0
	}
	return w.Length / time.Duration(w.Buckets)
}
