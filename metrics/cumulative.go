package metrics

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// The cumulative latencies: as with the counts, each latency is recorded in
// its bucket only, and the rotation (or Reset) that empties a bucket moves
// its histograms into the ring's latencyTotals. Moving costs what clearing
// did before (one pass over the bins), once per bucket interval, nothing
// per call.

// latencyTotals holds the run and total latencies moved out of the buckets.
type latencyTotals struct{ run, total histAccumulator }

// moveTo moves l's latencies into t, leaving l empty. The ring's mutex must
// be held.
func (l *latencies) moveTo(t *latencyTotals) {
	t.run.take(&l.same, &t.total)
	if h := l.run.Load(); h != nil {
		t.run.take(h, nil)
	}
	if h := l.total.Load(); h != nil {
		t.total.take(h, nil)
	}
}

// take empties h into a, and into also when it is not nil. Each bin is
// swapped out, so a record racing the move is counted once, here or in h.
func (a *histAccumulator) take(h *Histogram, also *histAccumulator) {
	if h.sum.Load() == 0 && h.bins[0].Load() == 0 {
		return // empty: see add
	}
	for i := range h.bins {
		if c := h.bins[i].Swap(0); c != 0 {
			n := int64(min(c, binMax))
			a.bins[i] += n
			if also != nil {
				also.bins[i] += n
			}
		}
	}
	sum := h.sum.Swap(0)
	a.addSum(sum)
	if also != nil {
		also.addSum(sum)
	}
}

// Distribution is the distribution of every latency a ring recorded since it
// was created, in the ring's log-linear bins (each at most 1/32 of its lower
// bound wide). Unlike Snapshot's percentiles, which cover the window, it
// only grows: what an exporter needs for a cumulative histogram (a
// Prometheus histogram's buckets, count and sum). A Distribution is a copy:
// it does not change after CumulativeLatency returns it.
type Distribution struct{ acc histAccumulator }

// Count returns the number of latencies recorded.
func (d *Distribution) Count() int64 {
	var n int64
	for _, c := range d.acc.bins {
		n += c
	}
	return n
}

// Sum returns the sum of the latencies recorded: exact, or, once it passed
// the largest Duration, estimated from the bins (each latency at its bin's
// middle) and capped at the largest Duration.
func (d *Distribution) Sum() time.Duration {
	if d.acc.sum >= 0 {
		return time.Duration(d.acc.sum)
	}
	if s := d.acc.estimatedSum(); s < math.MaxInt64 {
		return time.Duration(s)
	}
	return math.MaxInt64
}

// ErrBounds is the error of Distribution.CountsAtOrBelow given bounds that
// are not in increasing order.
var ErrBounds = errors.New("metrics: bounds must increase")

// CountsAtOrBelow returns, for each of bounds (in increasing order), the
// number of latencies at or below it: the cumulative buckets of a
// histogram with those upper bounds. A latency is known only to its bin, so
// a bin that straddles a bound counts below it when the bin's middle does:
// a count is exact for latencies more than 1.6% away from every bound. The
// error matches ErrBounds when bounds do not increase.
func (d *Distribution) CountsAtOrBelow(bounds []time.Duration) ([]int64, error) {
	if !slices.IsSorted(bounds) || len(slices.Compact(slices.Clone(bounds))) != len(bounds) {
		return nil, fmt.Errorf("%w: %v", ErrBounds, bounds)
	}
	counts := make([]int64, len(bounds))
	b, below := 0, int64(0)
	for i, c := range d.acc.bins {
		if c == 0 {
			continue
		}
		lo, width := binBounds(i)
		for b < len(bounds) && int64(bounds[b]) < lo+width/2 {
			counts[b] = below
			b++
		}
		below += c
	}
	for ; b < len(bounds); b++ {
		counts[b] = below
	}
	return counts, nil
}

// CumulativeLatency returns the distributions of the run and total
// latencies recorded since the ring was created (Reset does not clear
// them), or nil, nil for a ring without latency. Like Cumulative it takes
// the ring's mutex, so successive readings never decrease; it copies two
// 10 KiB accumulators and reads every bucket's histograms, so call it on a
// schedule (a scrape), not per request.
func (r *Rolling) CumulativeLatency() (run, total *Distribution) {
	if r.foldedLat == nil {
		return nil, nil
	}
	run, total = new(Distribution), new(Distribution)
	r.mu.Lock()
	defer r.mu.Unlock()
	run.acc, total.acc = r.foldedLat.run, r.foldedLat.total
	for i := range r.buckets {
		r.buckets[i].lat.addTo(&run.acc, &total.acc)
	}
	return run, total
}
