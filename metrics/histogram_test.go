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
	assert.Equal(t, numBins-1, binOf(math.MaxInt64), "huge values clamp into the last bin")
	assert.Equal(t, 0, binOf(-5), "negative values count as zero")
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
			for i, q := range Quantiles {
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
		assert.InEpsilon(t, float64(10*time.Millisecond), float64(p), 0.02, "single value, p%v", Quantiles[i])
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
