package metrics

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// The cumulative latencies: as with the counts, each latency is recorded in
// its bucket slot only, and the rotation (or Reset) that empties a slot
// moves its bins into the ring's ringLatency.foldedRun and foldedTotal.
// Moving costs what clearing did before (one pass over the slot's octaves),
// once per bucket interval, nothing per call.

// Distribution is the distribution of every latency a ring recorded since it
// was created, in the ring's log-linear bins (each at most 1/32 of its lower
// bound wide). Unlike Snapshot's percentiles, which cover the window, it
// only grows: what an exporter needs for a cumulative histogram (a
// Prometheus histogram's buckets, count and sum). A Distribution is a copy:
// it does not change after CumulativeLatency returns it.
type Distribution struct{ acc histAccumulator }

// Count returns the number of latencies recorded.
func (d *Distribution) Count() int64 {
	return d.acc.count()
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
// the ring's mutex, so successive readings never decrease; it copies the
// cumulative bins (256 bytes per power of two they span) and reads every
// bucket's, so call it on a schedule (a scrape), not per request.
func (r *Rolling) CumulativeLatency() (run, total *Distribution) {
	if r.lat == nil {
		return nil, nil
	}
	run, total = new(Distribution), new(Distribution)
	r.mu.Lock()
	defer r.mu.Unlock()
	run.acc.copyFrom(&r.lat.foldedRun)
	total.acc.copyFrom(&r.lat.foldedTotal)
	var same histAccumulator
	for i := range r.buckets {
		r.lat.addTo(&r.buckets[i], &same, &run.acc, &total.acc)
	}
	run.acc.merge(&same)
	total.acc.merge(&same)
	return run, total
}
