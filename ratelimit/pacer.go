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
	// Clock tells the time. Default metrics.SystemClock().
	Clock metrics.Clock
	// Sleep waits d, the time until the call's slot on Clock, or until ctx
	// ends (then it returns ctx's error). Default: a timer of the runtime.
	// Tests and simulations set it to move a metrics.ManualClock instead,
	// as with the Sleep of package command/retry's Config.
	Sleep func(ctx context.Context, d time.Duration) error
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
// refused at once, and takes no slot. A call whose ctx has ended already
// returns ctx's error and takes no slot, even when its slot would be now. A
// call whose ctx ends while it waits returns ctx's error; its slot stays
// used (the spacing never shrinks below Interval, at the cost of one idle
// slot).
type Pacer struct {
	mu       sync.Mutex
	next     time.Duration // the next free slot
	started  bool          // next is set
	interval time.Duration
	maxWait  time.Duration
	clock    metrics.Clock
	sleep    func(ctx context.Context, d time.Duration) error
}

// NewPacer returns a pacer whose first slot is the first call's instant, or
// an error wrapping ErrInvalidConfig.
func NewPacer(c PacerConfig) (*Pacer, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	p := &Pacer{interval: c.Interval, maxWait: c.MaxWait, clock: clockOr(c.Clock), sleep: c.Sleep}
	if p.sleep == nil {
		p.sleep = sleep
	}
	return p, nil
}

// Admit waits for the call's slot and returns nil, or refuses the call with
// a *LimitError (its slot is more than MaxWait away; RetryAfter is the time
// until the wait would fit), or returns ctx.Err() if ctx has ended, before
// the call (which then takes no slot) or during its wait (its slot stays
// used).
func (p *Pacer) Admit(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	wait, err := p.reserve(p.clock.Now())
	if err != nil || wait == 0 {
		return err
	}
	return p.sleep(ctx, wait)
}

// sleep waits d on a timer, or until ctx ends: PacerConfig.Sleep's default.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
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
