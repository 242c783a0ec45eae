package metrics

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The octave directory is indexed by octave&(octSlots-1) without a bounds
// check, and Record leaves the clamp of a huge latency to slotHist.record:
// both hold only if every octave a value up to MaxInt64 maps to, clamped or
// not, is a distinct index below octSlots, and the unclamped ones are past
// the last real octave (never allocated).
func TestOctSlots(t *testing.T) {
	assert.LessOrEqual(t, numOctaves, octSlots)
	assert.Equal(t, 1, bits.OnesCount(uint(octSlots)), "a power of two")
	assert.Less(t, binOf(math.MaxInt64)>>subBits, octSlots)
	assert.GreaterOrEqual(t, binOf(maxValue+1)>>subBits, numOctaves)
}

// The ring's percentiles keep the dense histogram's bins, so its error:
// latencies recorded through Record in every bucket of the window give the
// same summary as one Histogram of them all, within 2% of the exact
// percentiles, and the mean exactly.
func TestRingPercentileAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	dists := map[string]func() int64{
		"uniform":     func() int64 { return 1_000_000 + rng.Int64N(99_000_000) },
		"exponential": func() int64 { return int64(rng.ExpFloat64() * 20_000_000) },
		"bimodal": func() int64 {
			if rng.IntN(10) < 7 {
				return 200_000 + rng.Int64N(100_000)
			}
			return 300_000_000 + rng.Int64N(100_000_000)
		},
	}
	for name, draw := range dists {
		t.Run(name, func(t *testing.T) {
			r := newRing(t, true)
			var h Histogram
			values := make([]int64, 50_000)
			var sum int64
			for i := range values {
				values[i] = draw()
				sum += values[i]
				h.Record(time.Duration(values[i]))
				now := time.Duration(i%10) * 100 * time.Millisecond
				r.Record(now, SetOf(Success), time.Duration(values[i]), time.Duration(values[i]))
			}
			s := r.Snapshot(999 * time.Millisecond)
			assert.Equal(t, h.Snapshot(), s.Run)
			assert.Equal(t, s.Run, s.Total)
			require.EqualValues(t, len(values), s.Run.Count)
			assert.Equal(t, time.Duration(sum/int64(len(values))), s.Run.Mean)
			slices.Sort(values)
			for i, q := range Quantiles() {
				want := float64(exactPercentile(values, q))
				assert.InEpsilon(t, want, float64(s.Run.Percentiles[i]), 0.02, "p%v", q)
			}
		})
	}
}

// Latencies allocate bins only in the octaves they fall in: a ring whose
// calls all take 2^21 to 2^22 ns (2.1-4.2 ms) holds one octave, for every slot; a huge latency,
// clamped, takes the last octave.
func TestRingAllocatesOnlyTheOctavesUsed(t *testing.T) {
	r := newRing(t, true)
	for i := range 1000 {
		d := time.Duration(1<<21 + i*2000)
		r.Record(time.Duration(i)*time.Millisecond, SetOf(Success), d, d)
	}
	assert.Equal(t, 1, bits.OnesCount64(r.lat.same.have.Load()))
	assert.Nil(t, r.lat.run.Load(), "no call's run and total differed")

	r.Record(999*time.Millisecond, SetOf(Success), 10*time.Hour, 10*time.Hour)
	assert.Equal(t, 2, bits.OnesCount64(r.lat.same.have.Load()))
	assert.NotNil(t, r.lat.same.oct[numOctaves-1].Load(), "clamped into the last octave")
	s := r.Snapshot(999 * time.Millisecond)
	assert.InEpsilon(t, float64(maxValue), float64(s.Run.Percentiles[8]), 0.02)
}
