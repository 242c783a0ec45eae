package metrics

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBinBoundsRoundTrip(t *testing.T) {
	for _, v := range []int64{0, 1, 31, 32, 33, 63, 64, 65, 1000, 123456, 1 << 30, maxValue} {
		lo, w := binBounds(binOf(v))
		assert.True(t, lo <= v && v < lo+w, "value %d outside its bin [%d,%d)", v, lo, lo+w)
		assert.LessOrEqual(t, float64(w), math.Max(1, float64(lo)/subBuckets), "bin of %d too wide", v)
	}
	assert.Equal(t, numBins-1, binOf(maxValue), "the largest value is in the last bin")
	// Every bin's first and last value map to it, and bins tile [0, maxValue].
	next := int64(0)
	for i := range numBins {
		lo, w := binBounds(i)
		require.Equal(t, next, lo, "bin %d starts where bin %d ends", i, i-1)
		require.Equal(t, i, binOf(lo), "first value of bin %d", i)
		require.Equal(t, i, binOf(lo+w-1), "last value of bin %d", i)
		next = lo + w
	}
	assert.Equal(t, int64(maxValue)+1, next)
}

func exactPercentile(sorted []int64, q float64) int64 {
	n := len(sorted)
	rank := int(math.Ceil(q/100*float64(n))) - 1
	return sorted[min(max(rank, 0), n-1)]
}

func TestPercentileAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dists := map[string]func() int64{
		"uniform":     func() int64 { return 1_000_000 + rng.Int64N(99_000_000) },   // 1-100 ms
		"exponential": func() int64 { return int64(rng.ExpFloat64() * 20_000_000) }, // mean 20 ms
		"bimodal": func() int64 { // fast cache hits and slow misses
			if rng.IntN(10) < 7 {
				return 200_000 + rng.Int64N(100_000)
			}
			return 300_000_000 + rng.Int64N(100_000_000)
		},
	}
	for name, draw := range dists {
		t.Run(name, func(t *testing.T) {
			var h Histogram
			values := make([]int64, 200_000)
			var sum int64
			for i := range values {
				values[i] = draw()
				sum += values[i]
				h.Record(time.Duration(values[i]))
			}
			slices.Sort(values)
			l := h.Snapshot()
			require.EqualValues(t, len(values), l.Count)
			assert.Equal(t, time.Duration(sum/int64(len(values))), l.Mean)
			for i, q := range Quantiles() {
				want := float64(exactPercentile(values, q))
				got := float64(l.Percentiles[i])
				assert.InEpsilon(t, want, got, 0.02, "p%v: want %v got %v", q, time.Duration(want), time.Duration(got))
			}
		})
	}
}

func TestHistogramSmallCounts(t *testing.T) {
	var h Histogram
	assert.Equal(t, Latency{}, h.Snapshot(), "empty histogram summarises to zero")
	h.Record(10 * time.Millisecond)
	l := h.Snapshot()
	for i, p := range l.Percentiles {
		assert.InEpsilon(t, float64(10*time.Millisecond), float64(p), 0.02, "single value, p%v", Quantiles()[i])
	}
}

// Snapshot skips empty histograms; one holding only zero or negative
// durations is not empty.
func TestHistogramZeroDurationsAreNotEmpty(t *testing.T) {
	var h Histogram
	assert.Zero(t, h.Snapshot().Count)
	h.Record(0)
	h.Record(-time.Millisecond)
	s := h.Snapshot()
	assert.EqualValues(t, 2, s.Count)
	assert.Zero(t, s.Percentiles[8])
}

// Regression (issue 9, item 12): a negative latency was summed as is, so the
// mean could be negative (−5 s) while p0 read 0. It counts as zero.
func TestHistogramNegativeLatencyCountsAsZero(t *testing.T) {
	var h Histogram
	h.Record(-10 * time.Second)
	h.Record(0)
	l := h.Snapshot()
	assert.EqualValues(t, 2, l.Count)
	assert.Zero(t, l.Mean)
	assert.Zero(t, l.Percentiles[0])
	assert.Zero(t, l.Percentiles[8])

	t.Run("through a ring", func(t *testing.T) {
		r, err := NewRolling(DefaultWindow(), CountsAndLatencies)
		require.NoError(t, err)
		r.ObserveRun(0, -10*time.Second)
		r.ObserveTotal(0, -10*time.Second)
		s := r.Snapshot(0)
		assert.Equal(t, Latency{Count: 1}, s.Run)
		assert.Equal(t, Latency{Count: 1}, s.Total)
	})
}

// Regression (issue 9, item 12): huge latencies were summed as is, wrapping
// the sum (to 0 after four records of 2^62 ns, and the snapshot then took
// the histogram for empty). They count as the largest value, 2^44−1 ns.
func TestHistogramHugeLatencyCountsAsLargestValue(t *testing.T) {
	var h Histogram
	for range 4 {
		h.Record(1 << 62)
	}
	h.Record(math.MaxInt64)
	l := h.Snapshot()
	assert.EqualValues(t, 5, l.Count)
	assert.Equal(t, time.Duration(maxValue), l.Mean)
	for i, p := range l.Percentiles {
		assert.InEpsilon(t, float64(maxValue), float64(p), 0.02, "p%v", Quantiles()[i])
	}
}

// Regression (issue 9, item 12): the sum of many huge latencies wrapped
// negative. It saturates, and the mean is then estimated from the bins.
func TestHistogramSumSaturates(t *testing.T) {
	const n = 1<<63/maxValue + 10 // enough records of maxValue to pass MaxInt64
	var h Histogram
	for range n {
		h.Record(maxValue)
	}
	l := h.Snapshot()
	assert.EqualValues(t, n, l.Count)
	assert.InEpsilon(t, float64(maxValue), float64(l.Mean), 0.02)

	t.Run("merging histograms saturates too", func(t *testing.T) {
		var a, b Histogram
		for range n/2 + 10 { // each sum fits; the two together do not
			a.Record(maxValue)
			b.Record(maxValue)
		}
		var acc histAccumulator
		acc.add(&a)
		acc.add(&b)
		l := acc.latency()
		assert.EqualValues(t, 2*(n/2+10), l.Count)
		assert.InEpsilon(t, float64(maxValue), float64(l.Mean), 0.02)
	})
	t.Run("a saturated sum stays saturated", func(t *testing.T) {
		h.Record(time.Millisecond)
		assert.InEpsilon(t, float64(maxValue), float64(h.Snapshot().Mean), 0.02)
	})
}

// Regression (issue 9, item 12): a bin is 32 bits and wrapped to 0 after
// 2^32 records (the count went down, percentiles moved). A bin saturates at
// binMax records; later records in it are dropped, from the sum too, so
// count, mean and percentiles stay consistent. The tests set the bin near
// its limit directly rather than record 2^31 times.
func TestHistogramBinSaturates(t *testing.T) {
	const d = 10 * time.Millisecond
	i := binOf(int64(d))
	t.Run("at binMax", func(t *testing.T) {
		var h Histogram
		h.bins[i].Store(binMax - 1)
		for range 3 {
			h.Record(d)
		}
		l := h.Snapshot()
		assert.EqualValues(t, binMax, l.Count)
		assert.EqualValues(t, binMax, h.bins[i].Load())
		assert.EqualValues(t, d, h.sum.Load(), "only the record that fit is in the sum")
	})
	t.Run("past binMax (writers racing the saturation) it never wraps", func(t *testing.T) {
		var h Histogram
		h.Record(time.Millisecond)
		h.bins[i].Store(math.MaxUint32 - 1)
		for range 3 {
			h.Record(d)
		}
		l := h.Snapshot()
		assert.EqualValues(t, binMax+1, l.Count)
		lo, width := binBounds(i)
		assert.True(t, lo <= int64(l.Percentiles[8]) && int64(l.Percentiles[8]) < lo+width, "p100 %v in the bin of %v", l.Percentiles[8], d)
		assert.InEpsilon(t, float64(time.Millisecond), float64(l.Percentiles[0]), 0.02)
	})
}
