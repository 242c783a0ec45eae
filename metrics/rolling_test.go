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

func newRing(t *testing.T, latency bool) *Rolling {
	t.Helper()
	c := CountsOnly
	if latency {
		c = CountsAndLatencies
	}
	r, err := NewRolling(Window{Length: time.Second, Buckets: 10}, c)
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
		_, err = NewRolling(w, CountsOnly)
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
	r.Reset()
	s := r.Snapshot(200 * time.Millisecond)
	assert.Equal(t, Counts{}, s.Counts)
	assert.EqualValues(t, 20, s.Cumulative[Failure])
	r.Add(210*time.Millisecond, Success)
	assert.EqualValues(t, 1, r.Counts(210 * time.Millisecond)[Success])
}

// Count and CountsOf read what Counts reads, only less of it: the window's
// buckets (not a bucket that slid out, not a late write), and nothing after
// Reset. An event number beyond the events counts 0, as no call can be
// counted as one.
func TestRollingCountAndCountsOf(t *testing.T) {
	r := newRing(t, false) // 1 s in 10 buckets
	r.Record(0, SetOf(Failure, Slow), NoLatency, NoLatency)
	r.Record(500*time.Millisecond, SetOf(Success, Slow), NoLatency, NoLatency)
	now := 1100 * time.Millisecond
	r.Record(now, SetOf(Success), NoLatency, NoLatency)                  // buckets 0 and 1 leave the window
	r.Record(100*time.Millisecond, SetOf(Timeout), NoLatency, NoLatency) // late: cumulative only

	assert.EqualValues(t, 2, r.Count(now, Success))
	assert.EqualValues(t, 1, r.Count(now, Slow))
	assert.Zero(t, r.Count(now, Failure), "bucket 0 left the window")
	assert.Zero(t, r.Count(now, Timeout))
	assert.EqualValues(t, 1, r.Count(500*time.Millisecond, Success), "a read at an earlier instant leaves the newer bucket out")
	assert.EqualValues(t, 1, r.Count(500*time.Millisecond, Failure))
	assert.Zero(t, r.Count(now, NumEvents))
	assert.Zero(t, r.Count(now, Event(255)))

	var want Counts
	want[Success], want[Slow] = 2, 1
	assert.Equal(t, want, r.CountsOf(now, SetOf(Success, Failure, Slow)))
	assert.Equal(t, want, r.CountsOf(now, SetOf(Success, Failure, Slow)|1<<NumEvents|1<<31), "bits beyond the events are ignored")
	assert.Equal(t, Counts{}, r.CountsOf(now, 0))

	r.Reset()
	assert.Zero(t, r.Count(now, Success))
	assert.Equal(t, Counts{}, r.CountsOf(now, allEvents))
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

func TestRollingRecord(t *testing.T) {
	r := newRing(t, true)
	r.Record(10*time.Millisecond, SetOf(Failure, FallbackSuccess), 3*time.Millisecond, 4*time.Millisecond)
	r.Record(20*time.Millisecond, SetOf(Timeout, FallbackFailure, ExceptionThrown), NoLatency, 9*time.Millisecond)
	r.Record(30*time.Millisecond, 0, NoLatency, NoLatency)
	s := r.Snapshot(30 * time.Millisecond)
	want := Counts{Failure: 1, FallbackSuccess: 1, Timeout: 1, FallbackFailure: 1, ExceptionThrown: 1}
	assert.Equal(t, want, s.Counts)
	assert.Equal(t, want, s.Cumulative)
	assert.EqualValues(t, 1, s.Run.Count, "NoLatency records no run latency")
	assert.InEpsilon(t, float64(3*time.Millisecond), float64(s.Run.Mean), 0.001)
	assert.EqualValues(t, 2, s.Total.Count)

	r.Record(2*time.Second, SetOf(Success), time.Millisecond, time.Millisecond)
	r.Record(0, SetOf(Failure), time.Millisecond, time.Millisecond) // a whole window late
	s = r.Snapshot(2 * time.Second)
	assert.Equal(t, Counts{Success: 1}, s.Counts)
	assert.EqualValues(t, 2, s.Cumulative[Failure], "a late event counts cumulatively only")
	assert.EqualValues(t, 1, s.Total.Count)

	plain := newRing(t, false)
	plain.Record(0, SetOf(Success, Slow), time.Second, time.Second)
	s = plain.Snapshot(0)
	assert.Equal(t, Counts{Success: 1, Slow: 1}, s.Counts)
	assert.Zero(t, s.Run.Count+s.Total.Count, "a ring without latency ignores latencies")
}

func TestEventSet(t *testing.T) {
	var s EventSet
	assert.Zero(t, s.Len())
	assert.Empty(t, s.String())
	s.Add(Timeout)
	s.Add(FallbackSuccess)
	s.Add(Timeout)
	assert.Equal(t, SetOf(FallbackSuccess, Timeout), s)
	assert.True(t, s.Has(Timeout))
	assert.False(t, s.Has(Success))
	assert.Equal(t, 2, s.Len())
	assert.Equal(t, "TIMEOUT|FALLBACK_SUCCESS", s.String())
}

// refRing is the plainest model of a ring: every event with its bucket
// interval, and per slot the newest interval written to it. An event lands in
// the window iff its interval is not older than its slot's; a reader counts
// the events of the intervals that their slot still holds and that lie in
// the window.
type refRing struct {
	width, n int64
	slot     map[int64]int64 // slot -> newest epoch written
	events   map[int64]Counts
	total    Counts
}

func (m *refRing) epoch(now time.Duration) int64 {
	ep := int64(now) / m.width
	if now < 0 && int64(now)%m.width != 0 {
		ep--
	}
	return ep
}

func (m *refRing) add(now time.Duration, e Event) {
	m.total[e]++
	m.write(now, SetOf(e))
}

// write counts events in now's interval, unless its slot holds a later
// one: a write moves its slot to its interval even with no event.
func (m *refRing) write(now time.Duration, events EventSet) {
	ep := m.epoch(now)
	s := (ep%m.n + m.n) % m.n
	if cur, ok := m.slot[s]; ok && cur > ep {
		return
	}
	m.slot[s] = ep
	c := m.events[ep]
	for e := range NumEvents {
		if events.Has(e) {
			c[e]++
		}
	}
	m.events[ep] = c
}

func (m *refRing) counts(now time.Duration) Counts {
	cur := m.epoch(now)
	var out Counts
	for _, ep := range m.slot {
		if ep <= cur && ep > cur-m.n {
			for e, v := range m.events[ep] {
				out[e] += v
			}
		}
	}
	return out
}

// The ring against refRing over random instants: forward steps, exact bucket
// edges, jumps back, negative instants and instants far enough from the
// origin (beyond ±2^62 ns) that the current-bucket hint must stay unused.
func TestRollingMatchesModel(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		w := []Window{{Length: time.Second, Buckets: 10}, {Length: 3 * time.Millisecond, Buckets: 3},
			{Length: time.Duration(1<<20) * 8, Buckets: 8}}[rng.IntN(3)]
		r, err := NewRolling(w, CountsOnly)
		require.NoError(t, err)
		width := int64(w.BucketWidth())
		m := &refRing{width: width, n: int64(w.Buckets), slot: map[int64]int64{}, events: map[int64]Counts{}}
		bases := []int64{0, -5 * width, 1 << 62, -(1 << 62), math.MaxInt64 - 3*width, math.MinInt64 + 2*width}
		now := bases[rng.IntN(len(bases))]
		for step := range 400 {
			switch x := rng.IntN(10); {
			case x < 4:
				now += rng.Int64N(width / 2)
			case x < 6:
				now = (now/width+1)*width - rng.Int64N(2) // an edge, or just below it
			case x < 7:
				now -= rng.Int64N(2 * width * m.n)
			case x < 8:
				now += rng.Int64N(2 * width * m.n)
			}
			e := Event(rng.IntN(int(NumEvents)))
			r.Record(time.Duration(now), SetOf(e), NoLatency, NoLatency)
			m.add(time.Duration(now), e)
			at := time.Duration(now + rng.Int64N(width*m.n) - width)
			require.Equal(t, m.counts(at), r.Counts(at), "seed %d step %d: Counts(%d) after a write at %d", seed, step, at, now)
			back := time.Duration(now - rng.Int64N(2*width*m.n))
			for _, at := range []time.Duration{at, back} {
				requirePartialReads(t, r, at, m.counts(at), rng)
			}
		}
		require.Equal(t, m.total, r.Cumulative(), "seed %d", seed)
	}
}

// requirePartialReads checks Count and CountsOf at instant at against want,
// the window's counts there: Count for every event, CountsOf for the empty
// set, every event, one event, and a random set.
func requirePartialReads(t *testing.T, r *Rolling, at time.Duration, want Counts, rng *rand.Rand) {
	t.Helper()
	for e := range NumEvents {
		require.Equal(t, want[e], r.Count(at, e), "Count(%d, %v)", at, e)
	}
	for _, set := range []EventSet{0, allEvents, SetOf(Event(rng.IntN(int(NumEvents)))), EventSet(rng.Uint32()) & allEvents} {
		var masked Counts
		for e := range NumEvents {
			if set.Has(e) {
				masked[e] = want[e]
			}
		}
		require.Equal(t, masked, r.CountsOf(at, set), "CountsOf(%d, %v)", at, set)
	}
}

// Writers race rotation and the current-bucket hint while they move the
// clock themselves: each raises it to its own target as it goes, so the
// slower ones write behind the newest bucket. The window spans the whole
// run, so no write can land in a slot reused under it, and every bucket must
// hold exactly what was written in its interval; every bucket is checked
// (through prefix sums: Counts at the end of interval k sums intervals
// 0..k). The work is fixed (per writes each, their targets spread over
// spanned intervals), so how long the test runs does not depend on how the
// scheduler treats a clock goroutine of its own.
func TestRollingConcurrentRotationExactBuckets(t *testing.T) {
	const buckets, writers, per, spanned = 1000, 4, 100_000, 900
	w := Window{Length: buckets * time.Millisecond, Buckets: buckets}
	r, err := NewRolling(w, CountsAndLatencies)
	require.NoError(t, err)
	width := w.BucketWidth()
	stride := spanned * int64(width) / per // how far each write moves its writer's target
	var clock atomic.Int64                 // the newest instant: the largest target a writer reached
	var perEpoch [writers]map[int64]int64
	var wg sync.WaitGroup
	for i := range writers {
		perEpoch[i] = map[int64]int64{}
		wg.Go(func() {
			for k := range int64(per) {
				target := k * stride
				for c := clock.Load(); c < target && !clock.CompareAndSwap(c, target); c = clock.Load() {
				}
				now := time.Duration(clock.Load())
				r.Record(now, SetOf(Success), time.Duration(k%5000), NoLatency)
				perEpoch[i][int64(now/width)]++
			}
		})
	}
	wg.Wait()
	end := time.Duration(clock.Load())
	require.Equal(t, time.Duration((per-1)*stride), end, "the clock moved through the spanned intervals")

	var want int64
	for ep := int64(0); ep <= int64(end/width); ep++ {
		for i := range perEpoch {
			want += perEpoch[i][ep]
		}
		at := time.Duration(ep)*width + width - 1
		require.Equal(t, want, r.Counts(at)[Success], "intervals 0..%d", ep)
	}
	assert.Equal(t, int64(writers*per), want, "every write is in its bucket")
	assert.Equal(t, want, r.Cumulative()[Success])
	assert.Equal(t, want, r.Snapshot(end).Run.Count)
}

// Writers race rotation and Reset: the cumulative counts never decrease and
// end exact; the window never holds more than was written.
func TestRollingCumulativeExactUnderReset(t *testing.T) {
	r := newRing(t, false)
	var clock ManualClock
	const writers, per = 4, 20_000
	var left atomic.Int64
	left.Store(writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			defer left.Add(-1)
			for range per {
				r.Record(clock.Now(), SetOf(Success, ExceptionThrown), NoLatency, NoLatency)
			}
		})
	}
	wg.Go(func() {
		var last int64
		for i := 0; left.Load() > 0; i++ {
			clock.Advance(3 * time.Millisecond)
			if i%50 == 0 {
				r.Reset()
			}
			c := r.Cumulative()
			assert.GreaterOrEqual(t, c[Success], last, "cumulative went down")
			last = c[Success]
			assert.LessOrEqual(t, r.Counts(clock.Now())[Success], int64(writers*per))
		}
	})
	wg.Wait()
	c := r.Cumulative()
	assert.EqualValues(t, writers*per, c[Success])
	assert.EqualValues(t, writers*per, c[ExceptionThrown])
}

// Run and total latencies come out exactly as if each had a histogram of its
// own, however calls mix equal latencies (recorded once), different ones and
// missing ones, and ObserveRun/ObserveTotal.
func TestRollingLatenciesSplitExactly(t *testing.T) {
	r := newRing(t, true)
	var run, total Histogram
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 5000 {
		now := time.Duration(i) * time.Millisecond / 10 // all within the window
		d := time.Duration(rng.Int64N(int64(time.Second)))
		switch rng.IntN(5) {
		case 0, 1:
			r.Record(now, SetOf(Success), d, d)
			run.Record(d)
			total.Record(d)
		case 2:
			r.Record(now, SetOf(Failure, FallbackSuccess), d, d+time.Millisecond)
			run.Record(d)
			total.Record(d + time.Millisecond)
		case 3:
			r.Record(now, SetOf(ShortCircuited), NoLatency, d)
			total.Record(d)
		default:
			r.ObserveRun(now, d)
			run.Record(d)
			r.ObserveTotal(now, 2*d)
			total.Record(2 * d)
		}
	}
	s := r.Snapshot(500 * time.Millisecond)
	assert.Equal(t, run.Snapshot(), s.Run)
	assert.Equal(t, total.Snapshot(), s.Total)
}

// TestRollingRecordAllocations: once every bucket slot has had a call (the
// first latency in a slot creates its histogram, see
// TestRollingAllocatesWhatItUses), Record allocates nothing.
func TestRollingRecordAllocations(t *testing.T) {
	r := newRing(t, true)
	now := time.Duration(0)
	for range len(r.buckets) {
		now += r.window.BucketWidth()
		r.Record(now, SetOf(Success), time.Millisecond, time.Millisecond)
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		now += time.Millisecond // through every bucket, rotating
		r.Record(now, SetOf(Success), time.Millisecond, time.Millisecond)
	}))
	for range 10 { // one divergent call per bucket slot
		now += 100 * time.Millisecond
		r.Record(now, SetOf(Failure), time.Millisecond, 2*time.Millisecond)
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		now += time.Millisecond
		r.Record(now, SetOf(Failure), time.Millisecond, 2*time.Millisecond)
		r.Record(now, SetOf(ShortCircuited), NoLatency, time.Millisecond)
	}))
}

func TestWindowWithDefaults(t *testing.T) {
	assert.Equal(t, DefaultWindow(), Window{}.WithDefaults())
	assert.Equal(t, Window{Length: time.Second, Buckets: 10}, Window{Length: time.Second}.WithDefaults(), "per field")
	assert.Equal(t, Window{Length: 10 * time.Second, Buckets: 4}, Window{Buckets: 4}.WithDefaults())
	assert.Equal(t, Window{Length: -time.Second, Buckets: 10}, Window{Length: -time.Second}.WithDefaults(), "invalid values are left for Validate")
}
