package metrics

import (
	"sync/atomic"
	"time"
)

// Peak keeps the largest value observed over a sliding window of buckets
// (a group's peak of calls running at once): what a Rolling's Max keeps,
// and nothing else, in one value per bucket. ObserveMax is lock-free and
// allocation free; buckets rotate lazily, as a Rolling's do (the same code
// rotates both). A value observed at an instant a whole window behind the
// newest observation is not kept. Peak is safe for concurrent use.
type Peak struct {
	ring   // the buckets' intervals
	window Window
	maxes  []atomic.Int64 // bucket i's largest value, in lines of their own (see lines)
}

// NewPeak returns a peak over w.
func NewPeak(w Window) (*Peak, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	return &Peak{ring: makeRing(w), window: w, maxes: lines(w.Buckets)}, nil
}

// Window returns the window the peak covers.
func (p *Peak) Window() Window { return p.window }

// ObserveMax raises the maximum of instant now's bucket to v if v is
// larger.
func (p *Peak) ObserveMax(now time.Duration, v int64) {
	i, ok := p.hint(now)
	if !ok {
		if i = p.slotOf(p.epoch(now), p); i < 0 {
			return
		}
	}
	raise(&p.maxes[i], v)
}

// rotateIn empties the bucket in slot i, for the ring's rotate. p.mu is
// held.
func (p *Peak) rotateIn(i int, _ int64) { p.maxes[i].Store(0) }

// Max returns the largest value observed in the window that ends at now,
// and 0 if none was (as a Rolling's Snapshot.Max).
func (p *Peak) Max(now time.Duration) int64 {
	var m int64
	cur := p.epoch(now)
	for i := range p.maxes {
		if p.live(i, cur) {
			m = max(m, p.maxes[i].Load())
		}
	}
	return m
}
