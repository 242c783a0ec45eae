package windowed

import (
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/internal/ring"
	"github.com/bulwark-go/bulwark/metrics"
)

// Peak keeps the largest value observed over a sliding window of buckets (a
// group's peak of calls running at once): what a metrics.Rolling's Max
// keeps, and nothing else, in one value per bucket. ObserveMax is lock-free
// and allocation free; buckets rotate lazily, as a Rolling's do (the same
// code, package ring, rotates both). A value observed at an instant a whole
// window behind the newest observation is not kept. Peak is safe for
// concurrent use.
type Peak struct {
	ring   ring.Ring // the buckets' intervals
	window metrics.Window
	maxes  []atomic.Int64 // bucket i's largest value, in lines of their own (see ring.Lines)
}

// NewPeak returns a peak over w.
func NewPeak(w metrics.Window) (*Peak, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	return &Peak{ring: ring.New(w.BucketWidth(), w.Buckets), window: w, maxes: ring.Lines(w.Buckets)}, nil
}

// Window returns the window the peak covers.
func (p *Peak) Window() metrics.Window { return p.window }

// ObserveMax raises the maximum of instant now's bucket to v if v is
// larger.
func (p *Peak) ObserveMax(now time.Duration, v int64) {
	i, ok := p.ring.Hint(now)
	if !ok {
		if i = p.ring.SlotOf(p.ring.Epoch(now), p.rotateIn); i < 0 {
			return
		}
	}
	ring.Raise(&p.maxes[i], v)
}

// rotateIn empties the bucket in slot i, for the ring's rotation. The
// ring's mutex is held.
func (p *Peak) rotateIn(i int, _ int64) { p.maxes[i].Store(0) }

// Max returns the largest value observed in the window that ends at now,
// and 0 if none was (as a Rolling's Snapshot.Max).
func (p *Peak) Max(now time.Duration) int64 {
	var m int64
	cur := p.ring.Epoch(now)
	for i := range p.maxes {
		if p.ring.Live(i, cur) {
			m = max(m, p.maxes[i].Load())
		}
	}
	return m
}
