package ratelimit

import (
	"context"
	"time"

	"github.com/bulwark-go/bulwark/internal/limiter"
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
// A call is counted at its instant (Admit's clock reading, or the reading
// of the call's start a command group hands it: see command's Limiter),
// or at the newest instant the window has seen if that is later: calls
// that read the clock and then race for the window reach it out of order,
// and the later one in the window's order did happen after the newer
// reading. (Counted at its own older instant, such a call would be judged
// by a window that no longer holds the newest sub-window's calls, and
// admitted on top of them.) The guarantee above holds for these instants.
//
// Admit takes a mutex, so that the count and the admission are one step.
type SlidingWindow limiter.Window

// NewSlidingWindow returns an empty sliding window, or an error wrapping
// ErrInvalidConfig.
func NewSlidingWindow(c SlidingWindowConfig) (*SlidingWindow, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	w, err := limiter.NewWindow(c.Limit, c.Window, clockOr(c.Clock), refuse)
	if err != nil {
		return nil, invalid("SlidingWindowConfig.Window: %v", err)
	}
	return (*SlidingWindow)(w), nil
}

// Admit admits the call if the window holds fewer than Limit calls, or
// refuses it with a *LimitError whose RetryAfter is the time until the
// oldest sub-window leaves the window (the earliest instant a call could be
// admitted). It ignores ctx (it never waits).
func (w *SlidingWindow) Admit(_ context.Context) error { return (*limiter.Window)(w).Admit() }
