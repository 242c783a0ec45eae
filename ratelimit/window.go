package ratelimit

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// SlidingWindowConfig configures a SlidingWindow.
type SlidingWindowConfig struct {
	// Limit is how many calls the window admits. Required: positive.
	Limit int
	// Window is the span and its sub-windows (metrics buckets). Default,
	// per field: Length 1 s, Buckets 2 (two sub-windows of 500 ms).
	Window metrics.Window
	// Clock tells the time. Default metrics.SystemClock().
	Clock metrics.Clock
}

// withDefaults fills in the window's defaults.
func (c SlidingWindowConfig) withDefaults() SlidingWindowConfig {
	if c.Window.Length == 0 {
		c.Window.Length = time.Second
	}
	if c.Window.Buckets == 0 {
		c.Window.Buckets = 2
	}
	return c
}

// Validate reports the first invalid field of c; the error wraps
// ErrInvalidConfig.
func (c SlidingWindowConfig) Validate() error {
	if c.Limit <= 0 {
		return invalid("SlidingWindowConfig.Limit %d must be positive", c.Limit)
	}
	w := c.withDefaults().Window
	if err := w.Validate(); err != nil {
		return invalid("SlidingWindowConfig.Window {Length: %v, Buckets: %d}: %v", c.Window.Length, c.Window.Buckets, err)
	}
	return nil
}

// SlidingWindow admits at most Limit calls per window, counted over a
// rolling ring of sub-windows (metrics.Rolling). The guarantee, exactly: in
// any span of Window.Length that starts on a sub-window boundary, at most
// Limit calls are admitted. A span that starts inside a sub-window can
// overlap one more sub-window, so it may hold up to Limit plus that
// sub-window's calls: more sub-windows make the bound tighter, at the cost
// of a longer count on each call. (A fixed window, one sub-window, allows
// twice the limit in a moment around its boundary.)
//
// A call is counted at its instant (Admit's clock reading, AdmitAt's now),
// or at the newest instant the window has seen if that is later: calls
// that read the clock and then race for the window reach it out of order,
// and the later one in the window's order did happen after the newer
// reading. (Counted at its own older instant, such a call would be judged
// by a window that no longer holds the newest sub-window's calls, and
// admitted on top of them.) The guarantee above holds for these instants.
//
// Admit takes a mutex, so that the count and the admission are one step.
type SlidingWindow struct {
	mu     sync.Mutex
	limit  int64
	ring   *metrics.Rolling
	width  time.Duration
	clock  metrics.Clock
	newest time.Duration // the newest instant seen; calls are counted no earlier
}

// NewSlidingWindow returns an empty sliding window, or an error wrapping
// ErrInvalidConfig.
func NewSlidingWindow(c SlidingWindowConfig) (*SlidingWindow, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	ring, err := metrics.NewRolling(c.Window, metrics.CountsOnly)
	if err != nil {
		return nil, invalid("SlidingWindowConfig.Window: %v", err)
	}
	return &SlidingWindow{limit: int64(c.Limit), ring: ring, width: c.Window.BucketWidth(), clock: clockOr(c.Clock),
		newest: math.MinInt64}, nil
}

// admitted is the event a SlidingWindow counts its admitted calls as.
var admitted = metrics.SetOf(metrics.Success)

// Admit admits the call if the window holds fewer than Limit calls, or
// refuses it with a *LimitError whose RetryAfter is the time until the
// oldest sub-window leaves the window (the earliest instant a call could be
// admitted). It ignores ctx (it never waits).
func (w *SlidingWindow) Admit(_ context.Context) error {
	return w.AdmitAt(w.clock.Now())
}

// NeverWaits returns true: Admit admits or refuses at once. Callers such
// as command.Execute use it to skip a clock reading (command.NonWaiting).
func (w *SlidingWindow) NeverWaits() bool { return true }

// Clock returns the window's clock, the one AdmitAt's instant is read on.
func (w *SlidingWindow) Clock() metrics.Clock { return w.clock }

// AdmitAt is Admit at instant now, a reading of the window's Clock taken
// for this call, for a caller that has just read that clock (see
// command.ClockedLimiter): the window does not read it again. An instant
// older than the newest one seen counts as the newest (see SlidingWindow).
func (w *SlidingWindow) AdmitAt(now time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	now = max(now, w.newest)
	w.newest = now
	if w.ring.Count(now, metrics.Success) >= w.limit {
		return &LimitError{RetryAfter: w.width - mod(now, w.width)}
	}
	w.ring.Record(now, admitted, metrics.NoLatency, metrics.NoLatency)
	return nil
}

// mod returns now modulo width, in [0, width), also for a negative now.
func mod(now, width time.Duration) time.Duration {
	m := now % width
	if m < 0 {
		m += width
	}
	return m
}
