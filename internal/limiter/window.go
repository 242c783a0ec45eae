package limiter

import (
	"math"
	"sync"
	"time"

	"github.com/bulwark-go/bulwark/internal/windowed"
	"github.com/bulwark-go/bulwark/metrics"
)

// Window is the engine of ratelimit.SlidingWindow: at most limit calls
// counted over a windowed.Tally of one event, under a mutex so that the count
// and the admission are one step.
type Window struct {
	mu     sync.Mutex
	limit  int64
	ring   *windowed.Tally
	width  time.Duration
	clock  metrics.Clock
	refuse Refuse
	newest time.Duration // the newest instant seen; calls are counted no earlier
}

// NewWindow returns an empty window of shape w, valid, that admits limit
// calls, on clock.
func NewWindow(limit int, w metrics.Window, clock metrics.Clock, refuse Refuse) (*Window, error) {
	ring, err := windowed.NewTally(w, admitted)
	if err != nil {
		return nil, err
	}
	return &Window{limit: int64(limit), ring: ring, width: w.BucketWidth(), clock: clock, refuse: refuse,
		newest: math.MinInt64}, nil
}

// admitted is the event a Window counts its admitted calls as.
var admitted = metrics.SetOf(metrics.Success)

// Clock returns the window's clock.
func (w *Window) Clock() metrics.Clock { return w.clock }

// Admit is AdmitAt at the clock's reading now.
func (w *Window) Admit() error { return w.AdmitAt(w.clock.Now()) }

// AdmitAt admits a call at instant now if the window holds fewer than its
// limit, or refuses it with the time until the oldest sub-window leaves.
// An instant older than the newest one seen counts as the newest (see
// ratelimit.SlidingWindow).
func (w *Window) AdmitAt(now time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	now = max(now, w.newest)
	w.newest = now
	if w.ring.Counts(now)[metrics.Success] >= w.limit {
		return w.refuse(w.width - mod(now, w.width))
	}
	w.ring.Record(now, admitted)
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
