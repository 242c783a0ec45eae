package ratelimit

import (
	"context"
	"sync"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// PacerConfig configures a Pacer.
type PacerConfig struct {
	// Interval is the spacing between two admitted calls (1 s / rate).
	// Required: positive.
	Interval time.Duration
	// MaxWait is the longest a call waits for its slot; a call whose slot
	// lies further ahead is refused at once. Default 0: no waiting, a call
	// is admitted only if its slot is now.
	MaxWait time.Duration
	// Clock tells the time. Default metrics.SystemClock(). The wait itself
	// is a timer of the runtime, whatever the clock.
	Clock metrics.Clock
}

// Validate reports the first invalid field of c; the error wraps
// ErrInvalidConfig.
func (c PacerConfig) Validate() error {
	switch {
	case c.Interval <= 0:
		return invalid("PacerConfig.Interval %v must be positive", c.Interval)
	case c.MaxWait < 0:
		return invalid("PacerConfig.MaxWait %v must not be negative", c.MaxWait)
	}
	return nil
}

// Pacer is a leaky bucket: it spaces the calls it admits evenly, Interval
// apart, with no burst. Each call is given the next free slot and waits for
// it (Admit blocks), at most MaxWait; a call whose slot is further away is
// refused at once, and takes no slot. A call whose ctx ends while it waits
// returns ctx's error; its slot stays used (the spacing never shrinks below
// Interval, at the cost of one idle slot).
type Pacer struct {
	mu       sync.Mutex
	next     time.Duration // the next free slot
	started  bool          // next is set
	interval time.Duration
	maxWait  time.Duration
	clock    metrics.Clock
}

// NewPacer returns a pacer whose first slot is the first call's instant, or
// an error wrapping ErrInvalidConfig.
func NewPacer(c PacerConfig) (*Pacer, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &Pacer{interval: c.Interval, maxWait: c.MaxWait, clock: clockOr(c.Clock)}, nil
}

// Admit waits for the call's slot and returns nil, or refuses the call with
// a *LimitError (its slot is more than MaxWait away; RetryAfter is the time
// until the wait would fit), or returns ctx.Err() if ctx ends during the
// wait.
func (p *Pacer) Admit(ctx context.Context) error {
	wait, err := p.reserve(p.clock.Now())
	if err != nil || wait == 0 {
		return err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reserve gives the call arriving at now its slot and returns how long it
// must wait for it, or refuses it.
func (p *Pacer) reserve(now time.Duration) (time.Duration, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	slot := p.next
	if !p.started || slot < now {
		slot = now
	}
	wait := slot - now
	if wait > p.maxWait {
		return 0, &LimitError{RetryAfter: wait - p.maxWait}
	}
	p.next, p.started = slot+p.interval, true
	return wait, nil
}
