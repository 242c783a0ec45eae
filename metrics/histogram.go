package metrics

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// The histogram is log-linear: values below subBuckets nanoseconds get a bin
// each; above that, every power-of-two range is split into subBuckets equal
// bins. A bin is at most 1/subBuckets of its lower bound wide, so with the
// in-bin spreading used by the percentile estimate, the error on any
// percentile stays under 1/(2·subBuckets) ≈ 1.6%, whatever the load, in a
// fixed 5 KiB.
const (
	subBits    = 5
	subBuckets = 1 << subBits // bins per power of two
	maxBits    = 44           // values are clamped below 2^44 ns (about 4.9 hours)
	numBins    = subBuckets * (maxBits - subBits + 1)
	maxValue   = 1<<maxBits - 1

	// binMax is the most records a bin holds: a bin counts in 32 bits, and
	// saturating at 2^31 leaves 2^31 of headroom for writers that add
	// before they see the saturation, so a bin can never wrap to zero.
	binMax = 1 << 31
	// sumSaturated is the sum of a histogram whose true sum passed
	// MaxInt64. Any negative sum reads as saturated: values recorded are
	// never negative, so only an overflow makes the sum negative.
	sumSaturated = math.MinInt64
)

// Quantiles returns the percentiles every Latency reports, in this order:
// p0 (minimum), p25, p50, p75, p90, p95, p99, p99.5 and p100 (maximum).
func Quantiles() [9]float64 { return quantiles }

var quantiles = [9]float64{0, 25, 50, 75, 90, 95, 99, 99.5, 100}

// Latency summarises a latency distribution.
type Latency struct {
	Count       int64
	Mean        time.Duration
	Percentiles [9]time.Duration // index i is percentile Quantiles()[i]
}

// Histogram is a fixed log-linear latency histogram. Recording is one atomic
// add for the bin and one for the sum; it never allocates or locks. The zero
// value is ready to use and it is safe for concurrent use.
//
// Out-of-range input is clamped, never reported as nonsense: a negative
// duration counts as zero and a duration of 2^44 ns (about 4.9 hours) or more
// as 2^44−1 ns, in the percentiles and in the mean alike. A bin holds at most
// 2^31 records; further records that fall in a full bin are dropped (from the
// count and the sum both, so the mean stays the mean of what was counted).
// If the sum of the recorded durations passes the largest Duration (about
// 292 years), it saturates, and the mean is then estimated from the bins (to
// within the bins' 1.6% precision) instead of computed exactly.
//
// The sum comes first, on the cache line of bin 0: what tells an empty
// histogram (Histogram.empty) is one line.
type Histogram struct {
	sum  atomic.Int64           // negative: saturated (see sumSaturated)
	bins [numBins]atomic.Uint32 // at most binMax, but for writers racing the saturation
}

// binOf maps a value in nanoseconds, 0 ≤ v ≤ maxValue, to its bin index.
// Values below subBuckets have a bin each (shift 0); above, the value's
// top subBits+1 bits pick the bin within its power of two.
func binOf(v int64) int {
	shift := max(bits.Len64(uint64(v))-subBits-1, 0)
	return subBuckets*shift + int(v>>shift)
}

// binBounds returns the lowest value of bin i and the bin's width.
func binBounds(i int) (lo, width int64) {
	if i < subBuckets {
		return int64(i), 1
	}
	shift := i/subBuckets - 1
	return int64(subBuckets+i%subBuckets) << shift, 1 << shift
}

// Record adds one observation of d (clamped to [0, 2^44) ns).
func (h *Histogram) Record(d time.Duration) { h.record(max(int64(d), 0)) }

// record adds one observation of v ≥ 0 nanoseconds (clamped below 2^44). It
// is Record for callers that have already excluded negative values, small
// enough to be inlined in them (Rolling's hot path).
func (h *Histogram) record(v int64) {
	v = min(v, maxValue)
	bin := &h.bins[binOf(v)]
	if bin.Add(1) > binMax {
		bin.Store(binMax) // full: the record is dropped
	} else if h.sum.Add(v) < 0 {
		h.sum.Store(sumSaturated) // keeps it negative: saturated for good
	}
}

// histAccumulator merges histograms for one percentile computation.
type histAccumulator struct {
	bins [numBins]int64
	sum  int64 // negative: saturated
}

func (a *histAccumulator) add(h *Histogram) {
	// An empty histogram is skipped without a pass over its bins.
	sum, empty := h.loadSum()
	if empty {
		return
	}
	for i := range h.bins {
		if c := h.bins[i].Load(); c != 0 {
			a.bins[i] += int64(min(c, binMax))
		}
	}
	a.addSum(sum)
}

// addSum adds sum (negative: saturated) to a's sum, saturating it when the
// total passes the largest Duration.
func (a *histAccumulator) addSum(sum int64) { a.sum = addSaturating(a.sum, sum) }

// addSaturating returns a+b for two sums (negative: saturated), saturated
// when it passes the largest Duration.
func addSaturating(a, b int64) int64 {
	if a < 0 || b < 0 || a > math.MaxInt64-b {
		return sumSaturated
	}
	return a + b
}

// latency computes the summary. The k-th smallest observation (0-based) is
// estimated by spreading the c observations of its bin evenly over the bin:
// the j-th of them sits at lo + (j+0.5)·width/c. The rank for percentile q is
// the nearest-rank definition, ceil(q/100·n) - 1.
func (a *histAccumulator) latency() Latency {
	var n int64
	for _, c := range a.bins {
		n += c
	}
	l := Latency{Count: n}
	if n == 0 {
		return l
	}
	l.Mean = a.mean(n)
	bin, below := 0, int64(0)
	for qi, q := range quantiles {
		rank := rankOf(q, n)
		for below+a.bins[bin] <= rank {
			below += a.bins[bin]
			bin++
		}
		l.Percentiles[qi] = inBin(bin, rank-below, a.bins[bin])
	}
	return l
}

// rankOf returns the 0-based rank of percentile q among n observations.
func rankOf(q float64, n int64) int64 {
	return min(max(int64(math.Ceil(q/100*float64(n)))-1, 0), n-1)
}

// inBin estimates the j-th (0-based) of the c observations of bin.
func inBin(bin int, j, c int64) time.Duration {
	lo, width := binBounds(bin)
	return time.Duration(lo + int64((float64(j)+0.5)*float64(width)/float64(c)))
}

// mean returns the mean of the n observations: exact from the sum, or, when
// the sum saturated, estimated with each observation at its bin's middle.
func (a *histAccumulator) mean(n int64) time.Duration {
	if a.sum >= 0 {
		return time.Duration(a.sum / n)
	}
	return time.Duration(a.estimatedSum() / float64(n))
}

// estimatedSum returns the sum of the observations with each at its bin's
// middle.
func (a *histAccumulator) estimatedSum() float64 {
	var total float64
	for i, c := range a.bins {
		if c != 0 {
			lo, width := binBounds(i)
			total += float64(c) * (float64(lo) + float64(width)/2)
		}
	}
	return total
}

// Snapshot summarises what the histogram holds now.
func (h *Histogram) Snapshot() Latency {
	var a histAccumulator
	a.add(h)
	return a.latency()
}
