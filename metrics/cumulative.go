package metrics

import (
	"cmp"
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
// per call. The totals are touched only there and read by
// CumulativeLatency, so they hold only the bins used, as a Distribution
// does: a few hundred bytes where dense bins took 20 KiB.

// latencyTotals holds the latencies moved out of the buckets, kept as the
// buckets keep them: Run is same+run, Total is same+total.
type latencyTotals struct{ same, run, total sparseBins }

// sparseBins holds a latency distribution in only the bins used.
type sparseBins struct {
	bins []binCount // the bins used, in increasing order
	sum  int64      // negative: saturated
}

// empty reports whether l holds no latency (a nil l holds none). A record
// racing it is seen by the next move.
func (l *latencies) empty() bool {
	if l == nil {
		return true
	}
	for _, h := range l.hists() {
		if h != nil && !h.empty() {
			return false
		}
	}
	return true
}

// empty reports whether h holds no record: a record goes to bin 0 (values
// up to 0 ns) or makes the sum nonzero.
func (h *Histogram) empty() bool {
	_, empty := h.loadSum()
	return empty
}

// loadSum returns h's sum (negative: saturated), read before any bin, and
// whether h holds no record (see empty): a reader that then reads the bins
// finds every record whose duration the sum holds.
func (h *Histogram) loadSum() (sum int64, empty bool) {
	sum = h.sum.Load()
	return sum, sum == 0 && h.bins[0].Load() == 0
}

// moveTo moves l's latencies into t, leaving l empty. The ring's mutex must
// be held.
func (l *latencies) moveTo(t *latencyTotals) {
	t.same.take(&l.same)
	if h := l.run.Load(); h != nil {
		t.run.take(h)
	}
	if h := l.total.Load(); h != nil {
		t.total.take(h)
	}
}

// take empties h into s. Each bin used is swapped out, so a record racing
// the move is counted once, here or in h. The sum goes first: a record adds
// its bin, then its sum, so a record racing the move can leave its sum
// behind (taken by the next move, and seen by add), never a bin without a
// sum, which add and the next take would skip as empty.
func (s *sparseBins) take(h *Histogram) {
	if h.empty() {
		return
	}
	s.sum = addSaturating(s.sum, h.sum.Swap(0))
	used, j := len(s.bins), 0
	for i := range h.bins {
		if h.bins[i].Load() == 0 {
			continue // a record landing now stays for the next move
		}
		n := int64(min(h.bins[i].Swap(0), binMax))
		for j < used && int(s.bins[j].bin) < i {
			j++
		}
		if j < used && int(s.bins[j].bin) == i {
			s.bins[j].n += n
		} else {
			s.bins = append(s.bins, binCount{int32(i), n})
		}
	}
	if len(s.bins) > used {
		slices.SortFunc(s.bins, func(a, b binCount) int { return cmp.Compare(a.bin, b.bin) })
	}
}

// record adds the latency v (v >= 0), in nanoseconds, to s.
func (s *sparseBins) record(v int64) {
	v = min(v, maxValue)
	bin := int32(binOf(v))
	j, found := slices.BinarySearchFunc(s.bins, bin, func(bc binCount, bin int32) int { return cmp.Compare(bc.bin, bin) })
	if !found {
		s.bins = slices.Insert(s.bins, j, binCount{bin: bin})
	}
	s.bins[j].n++
	s.sum = addSaturating(s.sum, v)
}

// addTo adds s to a.
func (s *sparseBins) addTo(a *histAccumulator) {
	for _, bc := range s.bins {
		a.bins[bc.bin] += bc.n
	}
	a.addSum(s.sum)
}

// record adds one call's latencies to t as Rolling.Record adds them to a
// bucket (a negative latency is not recorded). The ring's mutex must be
// held.
func (t *latencyTotals) record(run, total time.Duration) {
	if run >= 0 {
		t.run.record(int64(run))
	}
	if total >= 0 {
		t.total.record(int64(total))
	}
}

// addTo adds t's run and total latencies to run and total; a nil t holds
// none.
func (t *latencyTotals) addTo(run, total *histAccumulator) {
	if t == nil {
		return
	}
	t.same.addTo(run)
	t.same.addTo(total)
	t.run.addTo(run)
	t.total.addTo(total)
}

// Distribution is the distribution of every latency a ring recorded since it
// was created, in the ring's log-linear bins (each at most 1/32 of its lower
// bound wide). Unlike Snapshot's percentiles, which cover the window, it
// only grows: what an exporter needs for a cumulative histogram (a
// Prometheus histogram's buckets, count and sum). A Distribution is a copy:
// it does not change after CumulativeLatency returns it. It holds only the
// bins that hold latencies.
type Distribution struct {
	bins   []binCount // the bins that hold latencies, in increasing order
	count  int64
	sum    int64   // negative: saturated
	estSum float64 // the sum with each latency at its bin's middle
}

// binCount is one bin of a Distribution and the latencies in it.
type binCount struct {
	bin int32
	n   int64
}

// distribution returns a's bins as a Distribution.
func (a *histAccumulator) distribution() *Distribution {
	d := &Distribution{sum: a.sum}
	used := 0
	for _, c := range a.bins {
		if c != 0 {
			used++
		}
	}
	d.bins = make([]binCount, 0, used)
	for i, c := range a.bins {
		if c != 0 {
			d.bins = append(d.bins, binCount{int32(i), c})
			d.count += c
		}
	}
	if d.sum < 0 {
		d.estSum = a.estimatedSum()
	}
	return d
}

// Count returns the number of latencies recorded.
func (d *Distribution) Count() int64 { return d.count }

// Sum returns the sum of the latencies recorded: exact, or, once it passed
// the largest Duration, estimated from the bins (each latency at its bin's
// middle) and capped at the largest Duration.
func (d *Distribution) Sum() time.Duration {
	if d.sum >= 0 {
		return time.Duration(d.sum)
	}
	if d.estSum < math.MaxInt64 {
		return time.Duration(d.estSum)
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
	for _, bc := range d.bins {
		c := bc.n
		lo, width := binBounds(int(bc.bin))
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
// the ring's mutex, so successive readings never decrease; it merges what
// left the window and every bucket's histograms into two 10 KiB
// accumulators, so call it on a schedule (a scrape), not per request. What
// it returns holds only the bins used.
func (r *Rolling) CumulativeLatency() (run, total *Distribution) {
	if !r.withLat {
		return nil, nil
	}
	var accRun, accTotal histAccumulator
	r.ring.Lock()
	r.foldedLat.addTo(&accRun, &accTotal)
	for i := range r.buckets {
		r.buckets[i].latencies().addTo(&accRun, &accTotal)
	}
	r.ring.Unlock()
	return accRun.distribution(), accTotal.distribution()
}

// CumulativeTotal returns the count and the sum of the total latencies
// recorded since the ring was created: CumulativeLatency's total Count and
// Sum, read without merging any bins into an accumulator and without
// allocating, for an exporter that needs no buckets (a summary's count and
// sum); only a saturated sum (past the largest Duration) is estimated from
// the bins through CumulativeLatency, which allocates. ok is false for a ring without latency. Like CumulativeLatency it
// takes the ring's mutex and reads each live bucket's bins, so call it on a
// schedule, not per request.
func (r *Rolling) CumulativeTotal() (count int64, sum time.Duration, ok bool) {
	if !r.withLat {
		return 0, 0, false
	}
	var s int64
	r.ring.Lock()
	if t := r.foldedLat; t != nil {
		for _, b := range [2]*sparseBins{&t.same, &t.total} {
			for _, bc := range b.bins {
				count += bc.n
			}
			s = addSaturating(s, b.sum)
		}
	}
	for i := range r.buckets {
		if l := r.buckets[i].latencies(); l != nil {
			for _, h := range [2]*Histogram{&l.same, l.total.Load()} {
				if h != nil {
					n, hs := h.countSum()
					count += n
					s = addSaturating(s, hs)
				}
			}
		}
	}
	r.ring.Unlock()
	if s < 0 { // saturated: the sum is estimated from the bins
		_, total := r.CumulativeLatency()
		return total.Count(), total.Sum(), true
	}
	return count, time.Duration(s), true
}

// countSum returns the number of records in h and their sum (negative:
// saturated), as histAccumulator.add reads them.
func (h *Histogram) countSum() (count, sum int64) {
	sum, empty := h.loadSum()
	if empty {
		return 0, 0
	}
	for i := range h.bins {
		if c := h.bins[i].Load(); c != 0 {
			count += int64(min(c, binMax))
		}
	}
	return count, sum
}
