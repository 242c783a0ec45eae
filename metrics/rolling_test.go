package metrics

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newRing(t *testing.T, latency bool) *Rolling {
	t.Helper()
	r, err := NewRolling(Window{Length: time.Second, Buckets: 10}, latency)
	require.NoError(t, err)
	return r
}

func TestWindowValidate(t *testing.T) {
	for _, w := range []Window{
		{Length: 0, Buckets: 10},
		{Length: -time.Second, Buckets: 10},
		{Length: time.Second, Buckets: 0},
		{Length: time.Second, Buckets: MaxBuckets + 1},
		{Length: time.Second, Buckets: 7},
		{Length: 5 * time.Millisecond, Buckets: 10},
	} {
		err := w.Validate()
		assert.ErrorIs(t, err, ErrInvalidConfig, "%+v", w)
		_, err = NewRolling(w, false)
		assert.ErrorIs(t, err, ErrInvalidConfig, "%+v", w)
	}
	require.NoError(t, DefaultWindow().Validate())
	assert.Equal(t, time.Second, DefaultWindow().BucketWidth())
}

func TestRollingSlidesBucketByBucket(t *testing.T) {
	r := newRing(t, false)
	for i := range 10 { // one success per 100 ms bucket, i+1 failures too
		now := time.Duration(i) * 100 * time.Millisecond
		r.Add(now, Success)
		for range i + 1 {
			r.Add(now, Failure)
		}
	}
	now := 999 * time.Millisecond
	c := r.Counts(now)
	assert.EqualValues(t, 10, c[Success])
	assert.EqualValues(t, 55, c[Failure])

	c = r.Counts(now + 100*time.Millisecond) // the first bucket left the window
	assert.EqualValues(t, 9, c[Success])
	assert.EqualValues(t, 54, c[Failure])

	c = r.Counts(now + 500*time.Millisecond)
	assert.EqualValues(t, 5, c[Success])
	assert.EqualValues(t, 40, c[Failure])
	assert.EqualValues(t, 55, r.Cumulative()[Failure], "cumulative counts never slide")
}

func TestRollingIdleGapLongerThanWindow(t *testing.T) {
	r := newRing(t, true)
	r.Add(50*time.Millisecond, Failure)
	r.ObserveTotal(50*time.Millisecond, time.Millisecond)
	r.ObserveMax(50*time.Millisecond, 7)

	later := 3700 * time.Millisecond // 3.7 windows of silence, reused slot index 7
	s := r.Snapshot(later)
	assert.Equal(t, Counts{}, s.Counts, "an idle gap empties the window without any write")
	assert.Zero(t, s.Max)
	assert.Zero(t, s.Total.Count)

	r.Add(later, Success)
	r.Add(later+450*time.Millisecond, Success) // slot 1, which still holds nothing
	s = r.Snapshot(later + 450*time.Millisecond)
	assert.EqualValues(t, 2, s.Counts[Success])
	assert.Zero(t, s.Counts[Failure])
	assert.EqualValues(t, 1, s.Cumulative[Failure])
}

func TestRollingSlotReuseResetsOldData(t *testing.T) {
	r := newRing(t, true)
	r.Add(0, Failure)
	r.ObserveRun(0, time.Second)
	r.ObserveMax(0, 9)
	// exactly one window later the same slot is reused: old data must be gone
	r.Add(time.Second, Success)
	r.ObserveRun(time.Second, time.Millisecond)
	s := r.Snapshot(time.Second)
	assert.Zero(t, s.Counts[Failure])
	assert.EqualValues(t, 1, s.Counts[Success])
	assert.EqualValues(t, 1, s.Run.Count)
	assert.Zero(t, s.Max)
}

func TestRollingLateWriterKeepsCumulativeOnly(t *testing.T) {
	r := newRing(t, false)
	r.Add(time.Second, Success)
	r.Add(0, Failure) // a writer that read its clock a whole window ago
	assert.Zero(t, r.Counts(time.Second)[Failure])
	assert.EqualValues(t, 1, r.Cumulative()[Failure])
}

func TestRollingReset(t *testing.T) {
	r := newRing(t, true)
	for i := range 20 {
		r.Add(time.Duration(i)*10*time.Millisecond, Failure)
	}
	r.Reset(200 * time.Millisecond)
	s := r.Snapshot(200 * time.Millisecond)
	assert.Equal(t, Counts{}, s.Counts)
	assert.EqualValues(t, 20, s.Cumulative[Failure])
	r.Add(210*time.Millisecond, Success)
	assert.EqualValues(t, 1, r.Counts(210 * time.Millisecond)[Success])
}

func TestRollingMaxAndLatency(t *testing.T) {
	r := newRing(t, true)
	for i := range 100 {
		now := time.Duration(i) * 5 * time.Millisecond
		r.ObserveMax(now, int64(i%13))
		r.ObserveRun(now, time.Duration(i+1)*time.Millisecond)
		r.ObserveTotal(now, time.Duration(i+2)*time.Millisecond)
	}
	s := r.Snapshot(495 * time.Millisecond)
	assert.EqualValues(t, 12, s.Max)
	assert.EqualValues(t, 100, s.Run.Count)
	assert.InEpsilon(t, float64(50*time.Millisecond), float64(s.Run.Percentiles[2]), 0.02)
	assert.InEpsilon(t, float64(101*time.Millisecond), float64(s.Total.Percentiles[8]), 0.02)

	plain := newRing(t, false)
	plain.ObserveRun(0, time.Second)
	assert.Zero(t, plain.Snapshot(0).Run.Count, "a ring without latency ignores observations")
}

// Many writers on one instant: the window must hold every count.
func TestRollingConcurrentWritersLoseNoCount(t *testing.T) {
	r := newRing(t, true)
	const writers, per = 16, 20_000
	var clock ManualClock
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range per {
				e := Event((w + i) % int(NumEvents))
				now := clock.Now()
				r.Add(now, e)
				r.ObserveTotal(now, time.Millisecond)
			}
		})
	}
	wg.Wait()
	s := r.Snapshot(clock.Now())
	var sum int64
	for _, c := range s.Counts {
		sum += c
	}
	assert.EqualValues(t, writers*per, sum)
	assert.EqualValues(t, writers*per, s.Total.Count)
	assert.Equal(t, s.Counts, s.Cumulative)
}

// Writers racing rotation: cumulative counts are exact, and the window never
// holds more than was written.
func TestRollingConcurrentRotation(t *testing.T) {
	r := newRing(t, false)
	var clock ManualClock
	const writers, per = 8, 20_000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-stop:
				return
			default:
				c := r.Counts(clock.Now())
				assert.LessOrEqual(t, c[Success], int64(writers*per))
				clock.Advance(7 * time.Millisecond)
			}
		}
	}()
	for range writers {
		wg.Go(func() {
			for range per {
				r.Add(clock.Now(), Success)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-readerDone
	assert.EqualValues(t, writers*per, r.Cumulative()[Success])
}

// Regression: a clock reading before its origin used to index the ring with a
// negative number and panic.
func TestRollingNegativeInstants(t *testing.T) {
	r := newRing(t, true)
	r.Add(-1500*time.Millisecond, Failure)
	r.ObserveTotal(-1500*time.Millisecond, time.Millisecond)
	r.Add(-50*time.Millisecond, Success)
	c := r.Counts(-50 * time.Millisecond)
	assert.EqualValues(t, 1, c[Success])
	assert.Zero(t, c[Failure], "1.5 s before is outside a 1 s window")
	assert.EqualValues(t, 1, r.Counts(0)[Success], "-50 ms is still inside the window at 0")
	assert.Zero(t, r.Counts(time.Second)[Success])
}
