package metrics

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/bulwark-go/bulwark/internal/cacheline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// breakerSet is the set a circuit breaker's window counts.
var breakerSet = SetOf(Success, Failure, Timeout, Slow)

func newTally(t *testing.T, set EventSet) *Tally {
	t.Helper()
	tl, err := NewTally(Window{Length: time.Second, Buckets: 10}, set)
	require.NoError(t, err)
	return tl
}

func TestNewTallyRefusesABadConfig(t *testing.T) {
	_, err := NewTally(Window{Length: time.Second, Buckets: 3}, breakerSet)
	require.ErrorIs(t, err, ErrInvalidConfig, "a length that does not divide into buckets")
	_, err = NewTally(DefaultWindow(), 0)
	require.ErrorIs(t, err, ErrInvalidConfig, "no event")
	_, err = NewTally(DefaultWindow(), ^allEvents)
	require.ErrorIs(t, err, ErrInvalidConfig, "only bits that stand for no event")
}

// A tally counts its set's events, bucket by bucket, as a Rolling does:
// what slides out leaves, a late write counts nowhere, Reset empties it.
func TestTallySlidesIgnoresAndResets(t *testing.T) {
	tl := newTally(t, breakerSet) // 1 s in 10 buckets
	tl.Record(0, SetOf(Success, Slow))
	tl.Record(50*time.Millisecond, SetOf(Failure, ExceptionThrown))
	tl.Record(150*time.Millisecond, SetOf(Timeout))
	tl.Record(150*time.Millisecond, SetOf(ShortCircuited)) // not in the set
	assert.Equal(t, Counts{Success: 1, Slow: 1, Failure: 1, Timeout: 1}, tl.Counts(999*time.Millisecond))
	assert.Equal(t, Counts{Timeout: 1}, tl.Counts(time.Second), "bucket 0 slid out")
	assert.Equal(t, Counts{}, tl.Counts(1150*time.Millisecond))

	tl.Record(2*time.Second, SetOf(Success))
	tl.Record(time.Second, SetOf(Failure)) // a writer that read its clock a whole window ago
	assert.Equal(t, Counts{Success: 1}, tl.Counts(2*time.Second))

	tl.Reset()
	assert.Equal(t, Counts{}, tl.Counts(2*time.Second))
	tl.Record(2*time.Second, SetOf(Failure))
	assert.Equal(t, Counts{Failure: 1}, tl.Counts(2*time.Second))
}

// The tally against refRing, the model TestRollingMatchesModel checks a
// Rolling against, over the same random walk of instants (forward steps,
// edges, jumps back, negative instants and instants beyond ±2^62 ns), each
// write a random set of events, and a random set tallied.
func TestTallyMatchesModel(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 11))
		w := []Window{{Length: time.Second, Buckets: 10}, {Length: 3 * time.Millisecond, Buckets: 3},
			{Length: time.Duration(1<<20) * 8, Buckets: 8}}[rng.IntN(3)]
		set := breakerSet
		if seed%2 == 1 {
			set = EventSet(rng.Uint32())&allEvents | SetOf(Event(rng.IntN(int(NumEvents))))
		}
		tl, err := NewTally(w, set)
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
			events := EventSet(rng.Uint32()) & allEvents & EventSet(rng.Uint32())
			tl.Record(time.Duration(now), events)
			m.write(time.Duration(now), events&set)
			for _, at := range []time.Duration{time.Duration(now + rng.Int64N(width*m.n) - width), time.Duration(now - rng.Int64N(2*width*m.n))} {
				require.Equal(t, m.counts(at), tl.Counts(at), "seed %d step %d: Counts(%d) after a write at %d", seed, step, at, now)
			}
		}
	}
}

// Writers in one bucket interval, on every core: the tally holds exactly
// what they wrote.
func TestTallyConcurrentWritersLoseNoCount(t *testing.T) {
	tl := newTally(t, breakerSet)
	const writers, per = 16, 20_000
	var clock ManualClock
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range per {
				events := SetOf([...]Event{Success, Failure, Timeout}[(w+i)%3])
				if i%4 == 0 {
					events.Add(Slow)
				}
				tl.Record(clock.Now(), events)
			}
		})
	}
	wg.Wait()
	c := tl.Counts(clock.Now())
	assert.EqualValues(t, writers*per, c[Success]+c[Failure]+c[Timeout])
	assert.EqualValues(t, writers*per/4, c[Slow])
}

// Writers racing rotation: the window never holds more than was written
// in it, and once the writers are done it holds exactly their last
// interval's writes.
func TestTallyConcurrentRotation(t *testing.T) {
	tl := newTally(t, SetOf(Success))
	var clock ManualClock
	const writers, per = 8, 20_000
	var written atomic.Int64
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
				assert.LessOrEqual(t, tl.Counts(clock.Now())[Success], written.Load()+writers)
				clock.Advance(7 * time.Millisecond)
			}
		}
	}()
	for range writers {
		wg.Go(func() {
			for range per {
				tl.Record(clock.Now(), SetOf(Success))
				written.Add(1)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-readerDone
	clock.Advance(time.Second)
	for range 10 {
		tl.Record(clock.Now(), SetOf(Success))
	}
	assert.EqualValues(t, 10, tl.Counts(clock.Now())[Success])
}

// A tally is its struct, its slots' epochs and its counters, the counters
// rounded up to whole cache lines; recording, rotating, reading and
// resetting allocate nothing.
func TestTallyAllocatesWhatItUses(t *testing.T) {
	w := DefaultWindow()
	tallies := make([]*Tally, 0, trials*runs)
	bytes, objects := allocated(func() {
		tl, err := NewTally(w, breakerSet)
		require.NoError(t, err)
		tallies = append(tallies, tl)
	})
	assert.InDelta(t, 3, objects, 0.1, "the tally, its epochs and its counters")
	counters := uintptr(cap(tallies[0].counts)) * unsafe.Sizeof(atomic.Int64{})
	assert.Equal(t, uintptr(w.Buckets*4*8+cacheline.Size-1)/cacheline.Size*cacheline.Size, counters,
		"four counters a bucket, rounded up to whole cache lines")
	requireSize(t, unsafe.Sizeof(Tally{})+uintptr(w.Buckets)*8+counters, bytes, "a new tally")
	runtime.KeepAlive(tallies)

	tl := tallies[0]
	now := time.Duration(0)
	bytes, objects = allocated(func() {
		now += w.BucketWidth() / 3 // through every bucket, rotating
		tl.Record(now, SetOf(Success, Slow))
		tl.Record(now-w.Length, SetOf(Failure)) // too late for any bucket
		tl.Counts(now)
		if now%(7*w.BucketWidth()) == 0 {
			tl.Reset()
		}
	})
	requireNone(t, bytes, objects, "a tally in use")
}
