package metrics

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCumulativeLatencyKeepsWhatLeftTheWindow: latencies that rotation or
// Reset moved out of the window are still in the cumulative distribution,
// run and total apart.
func TestCumulativeLatencyKeepsWhatLeftTheWindow(t *testing.T) {
	r := newRing(t, true)
	ok := SetOf(Success)
	for range 3 {
		r.Record(0, ok, 10*time.Millisecond, 10*time.Millisecond)
	}
	r.Record(500*time.Millisecond, ok, 20*time.Millisecond, 50*time.Millisecond)
	r.Record(5*time.Second, ok, 100*time.Millisecond, 100*time.Millisecond) // the others leave the window
	assert.Equal(t, int64(1), r.Snapshot(5*time.Second).Run.Count)

	run, total := r.CumulativeLatency()
	assert.Equal(t, int64(5), run.Count())
	assert.Equal(t, 150*time.Millisecond, run.Sum())
	assert.Equal(t, int64(5), total.Count())
	assert.Equal(t, 180*time.Millisecond, total.Sum())

	r.Reset()
	r.Record(6*time.Second, ok, time.Millisecond, NoLatency)
	run, total = r.CumulativeLatency()
	assert.Equal(t, int64(6), run.Count(), "Reset keeps them")
	assert.Equal(t, 151*time.Millisecond, run.Sum())
	assert.Equal(t, int64(5), total.Count(), "no total latency recorded")

	run, total = newRing(t, false).CumulativeLatency()
	assert.Nil(t, run, "a ring without latency")
	assert.Nil(t, total)
}

func TestDistributionCountsAtOrBelow(t *testing.T) {
	r := newRing(t, true)
	for i, d := range []time.Duration{900 * time.Microsecond, 4 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond, 3 * time.Second} {
		r.Record(time.Duration(i)*time.Second, SetOf(Success), d, d)
	}
	run, _ := r.CumulativeLatency()
	got, err := run.CountsAtOrBelow([]time.Duration{time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond, time.Second})
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 2, 2, 4, 4}, got)

	// Below 32 ns every nanosecond has its bin: exact at the bound.
	r = newRing(t, true)
	r.Record(0, SetOf(Success), 7, 7)
	run, _ = r.CumulativeLatency()
	got, err = run.CountsAtOrBelow([]time.Duration{6, 7})
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 1}, got)

	for _, bad := range [][]time.Duration{{2, 1}, {1, 1}} {
		_, err = run.CountsAtOrBelow(bad)
		assert.ErrorIs(t, err, ErrBounds, "%v", bad)
	}
}

// TestCumulativeLatencyKeepsLateCalls: a call recorded at an instant older
// than the window (its writer read the clock a whole window ago) counts
// since creation, latencies included, and not in the window.
func TestCumulativeLatencyKeepsLateCalls(t *testing.T) {
	r := newRing(t, true)
	r.Record(2*time.Second, SetOf(Success), 3*time.Millisecond, 3*time.Millisecond)
	r.Record(0, SetOf(Failure), 5*time.Millisecond, 7*time.Millisecond) // too late for any bucket
	r.Record(0, SetOf(ShortCircuited), NoLatency, time.Millisecond)
	s := r.Snapshot(2 * time.Second)
	assert.Equal(t, Counts{Success: 1}, s.Counts)
	assert.Equal(t, Counts{Success: 1, Failure: 1, ShortCircuited: 1}, s.Cumulative)
	assert.EqualValues(t, 1, s.Run.Count, "the window holds the timely call only")
	run, total := r.CumulativeLatency()
	assert.EqualValues(t, 2, run.Count())
	assert.Equal(t, 8*time.Millisecond, run.Sum())
	assert.EqualValues(t, 3, total.Count())
	assert.Equal(t, 11*time.Millisecond, total.Sum())
}

// TestCumulativeLatencyExactUnderRotation: writers racing rotations and
// Resets lose no latency and the cumulative count never goes down.
func TestCumulativeLatencyExactUnderRotation(t *testing.T) {
	r := newRing(t, true)
	var clock ManualClock
	const writers, per = 4, 5_000
	var left atomic.Int64
	left.Store(writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			defer left.Add(-1)
			for i := range per {
				d := time.Duration(i%7+1) * time.Millisecond
				r.Record(clock.Now(), SetOf(Success), d, d+time.Millisecond)
			}
		})
	}
	wg.Go(func() {
		var last, lastTotal int64
		for i := 0; left.Load() > 0; i++ {
			clock.Advance(3 * time.Millisecond)
			if i%50 == 0 {
				r.Reset()
			}
			run, _ := r.CumulativeLatency()
			assert.GreaterOrEqual(t, run.Count(), last, "cumulative count went down")
			last = run.Count()
			n, _, ok := r.CumulativeTotal()
			assert.True(t, ok)
			assert.GreaterOrEqual(t, n, lastTotal, "CumulativeTotal's count went down")
			lastTotal = n
		}
	})
	wg.Wait()
	run, total := r.CumulativeLatency()
	assert.EqualValues(t, writers*per, run.Count())
	assert.EqualValues(t, writers*per, total.Count())
	assert.Equal(t, total.Sum()-run.Sum(), writers*per*time.Millisecond)
	n, sum, ok := r.CumulativeTotal()
	assert.True(t, ok)
	assert.Equal(t, total.Count(), n)
	assert.Equal(t, total.Sum(), sum)
}

// TestCumulativeTotalIsCumulativeLatencysTotal: over random calls spread
// across buckets, rotations, late calls and Resets (latencies apart and
// run equal to total alike), CumulativeTotal is the count and sum of
// CumulativeLatency's total distribution, also once the sum saturates.
func TestCumulativeTotalIsCumulativeLatencysTotal(t *testing.T) {
	r := newRing(t, true)
	var clock ManualClock
	rnd := rand.New(rand.NewPCG(24, 3))
	check := func() {
		t.Helper()
		_, total := r.CumulativeLatency()
		n, sum, ok := r.CumulativeTotal()
		require.True(t, ok)
		require.Equal(t, total.Count(), n)
		require.Equal(t, total.Sum(), sum)
	}
	check()
	for i := range 3000 {
		run := time.Duration(rnd.Int64N(int64(time.Second)))
		total := run
		if rnd.IntN(2) == 0 {
			total += time.Duration(rnd.Int64N(int64(time.Millisecond)))
		}
		now := clock.Now()
		if rnd.IntN(10) == 0 {
			now -= time.Duration(rnd.Int64N(int64(20 * time.Second))) // late, or past the window
		}
		r.Record(now, SetOf(Success), run, total)
		clock.Advance(time.Duration(rnd.Int64N(int64(300 * time.Millisecond))))
		if i%500 == 499 {
			r.Reset()
		}
		if i%37 == 0 {
			check()
		}
	}
	check()
	for range 1 << 20 { // a latency is clamped below 2^44 ns: 2^19 of them pass 2^63
		r.Record(clock.Now(), SetOf(Success), math.MaxInt64, math.MaxInt64)
	}
	check()
	_, sum, _ := r.CumulativeTotal()
	require.Greater(t, sum, time.Duration(math.MaxInt64/2), "the saturated sum is estimated, not lost")
	_, _, ok := newRing(t, false).CumulativeTotal()
	require.False(t, ok)
}
