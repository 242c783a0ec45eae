package windowed

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/bulwark-go/bulwark/internal/alloctest"
	"github.com/bulwark-go/bulwark/internal/cacheline"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// breakerSet is the set a circuit breaker's window counts.
var breakerSet = metrics.SetOf(metrics.Success, metrics.Failure, metrics.Timeout, metrics.Slow)

func newTally(t *testing.T, set metrics.EventSet) *Tally {
	t.Helper()
	tl, err := NewTally(metrics.Window{Length: time.Second, Buckets: 10}, set)
	require.NoError(t, err)
	return tl
}

func TestNewTallyRefusesABadConfig(t *testing.T) {
	_, err := NewTally(metrics.Window{Length: time.Second, Buckets: 3}, breakerSet)
	require.ErrorIs(t, err, metrics.ErrInvalidConfig, "a length that does not divide into buckets")
	_, err = NewTally(metrics.DefaultWindow(), 0)
	require.ErrorIs(t, err, metrics.ErrInvalidConfig, "no event")
	_, err = NewTally(metrics.DefaultWindow(), ^allEvents)
	require.ErrorIs(t, err, metrics.ErrInvalidConfig, "only bits that stand for no event")
}

// A tally counts its set's events, bucket by bucket, as a Rolling does:
// what slides out leaves, a late write counts nowhere, Reset empties it.
func TestTallySlidesIgnoresAndResets(t *testing.T) {
	tl := newTally(t, breakerSet) // 1 s in 10 buckets
	tl.Record(0, metrics.SetOf(metrics.Success, metrics.Slow))
	tl.Record(50*time.Millisecond, metrics.SetOf(metrics.Failure, metrics.ExceptionThrown))
	tl.Record(150*time.Millisecond, metrics.SetOf(metrics.Timeout))
	tl.Record(150*time.Millisecond, metrics.SetOf(metrics.ShortCircuited)) // not in the set
	assert.Equal(t, metrics.Counts{metrics.Success: 1, metrics.Slow: 1, metrics.Failure: 1, metrics.Timeout: 1}, tl.Counts(999*time.Millisecond))
	assert.Equal(t, metrics.Counts{metrics.Timeout: 1}, tl.Counts(time.Second), "bucket 0 slid out")
	assert.Equal(t, metrics.Counts{}, tl.Counts(1150*time.Millisecond))

	tl.Record(2*time.Second, metrics.SetOf(metrics.Success))
	tl.Record(time.Second, metrics.SetOf(metrics.Failure)) // a writer that read its clock a whole window ago
	assert.Equal(t, metrics.Counts{metrics.Success: 1}, tl.Counts(2*time.Second))

	tl.Reset()
	assert.Equal(t, metrics.Counts{}, tl.Counts(2*time.Second))
	tl.Record(2*time.Second, metrics.SetOf(metrics.Failure))
	assert.Equal(t, metrics.Counts{metrics.Failure: 1}, tl.Counts(2*time.Second))
}

// A tally counts what a Rolling's window counts of its set: the two, given
// the same writes over the random walk of instants TestRollingMatchesModel
// takes (forward steps, edges, jumps back, negative instants and instants
// beyond ±2^62 ns), each write a random set of events, read the same counts
// of a random set tallied everywhere in and behind the window. The Rolling
// is given only the set's events, so that a write of none of them still
// moves its slot as the tally's does.
func TestTallyMatchesRolling(t *testing.T) {
	walk(t, 11, func(w metrics.Window, rng *rand.Rand) func(step) {
		set := breakerSet
		if rng.IntN(2) == 1 {
			set = metrics.EventSet(rng.Uint32())&allEvents | metrics.SetOf(metrics.Event(rng.IntN(int(metrics.NumEvents))))
		}
		tl, err := NewTally(w, set)
		require.NoError(t, err)
		r, err := metrics.NewRolling(w, metrics.CountsOnly)
		require.NoError(t, err)
		return func(s step) {
			events := metrics.EventSet(s.rng.Uint32()) & allEvents & metrics.EventSet(s.rng.Uint32())
			tl.Record(s.now, events)
			r.Record(s.now, events&set, metrics.NoLatency, metrics.NoLatency)
			for _, at := range s.reads {
				require.Equal(t, r.Snapshot(at).Counts, tl.Counts(at), "seed %d step %d: Counts(%d) after a write at %d", s.seed, s.i, at, s.now)
			}
		}
	})
}

// Writers in one bucket interval, on every core: the tally holds exactly
// what they wrote.
func TestTallyConcurrentWritersLoseNoCount(t *testing.T) {
	tl := newTally(t, breakerSet)
	const writers, per = 16, 20_000
	var clock metrics.ManualClock
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range per {
				events := metrics.SetOf([...]metrics.Event{metrics.Success, metrics.Failure, metrics.Timeout}[(w+i)%3])
				if i%4 == 0 {
					events.Add(metrics.Slow)
				}
				tl.Record(clock.Now(), events)
			}
		})
	}
	wg.Wait()
	c := tl.Counts(clock.Now())
	assert.EqualValues(t, writers*per, c[metrics.Success]+c[metrics.Failure]+c[metrics.Timeout])
	assert.EqualValues(t, writers*per/4, c[metrics.Slow])
}

// Writers racing rotation: the window never holds more than was written
// in it, and once the writers are done it holds exactly their last
// interval's writes.
func TestTallyConcurrentRotation(t *testing.T) {
	tl := newTally(t, metrics.SetOf(metrics.Success))
	var clock metrics.ManualClock
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
				assert.LessOrEqual(t, tl.Counts(clock.Now())[metrics.Success], written.Load()+writers)
				clock.Advance(7 * time.Millisecond)
			}
		}
	}()
	for range writers {
		wg.Go(func() {
			for range per {
				tl.Record(clock.Now(), metrics.SetOf(metrics.Success))
				written.Add(1)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-readerDone
	clock.Advance(time.Second)
	for range 10 {
		tl.Record(clock.Now(), metrics.SetOf(metrics.Success))
	}
	assert.EqualValues(t, 10, tl.Counts(clock.Now())[metrics.Success])
}

// A tally is its struct, its slots' epochs and its counters, the counters
// rounded up to whole cache lines; recording, rotating, reading and
// resetting allocate nothing.
func TestTallyAllocatesWhatItUses(t *testing.T) {
	w := metrics.DefaultWindow()
	tallies := make([]*Tally, 0, alloctest.Trials*alloctest.Runs)
	bytes, objects := alloctest.Allocated(func() {
		tl, err := NewTally(w, breakerSet)
		require.NoError(t, err)
		tallies = append(tallies, tl)
	})
	assert.InDelta(t, 3, objects, 0.1, "the tally, its epochs and its counters")
	counters := uintptr(cap(tallies[0].counts)) * unsafe.Sizeof(atomic.Int64{})
	assert.Equal(t, uintptr(w.Buckets*4*8+cacheline.Size-1)/cacheline.Size*cacheline.Size, counters,
		"four counters a bucket, rounded up to whole cache lines")
	alloctest.RequireSize(t, unsafe.Sizeof(Tally{})+uintptr(w.Buckets)*8+counters, bytes, "a new tally")
	runtime.KeepAlive(tallies)

	tl := tallies[0]
	now := time.Duration(0)
	bytes, objects = alloctest.Allocated(func() {
		now += w.BucketWidth() / 3 // through every bucket, rotating
		tl.Record(now, metrics.SetOf(metrics.Success, metrics.Slow))
		tl.Record(now-w.Length, metrics.SetOf(metrics.Failure)) // too late for any bucket
		tl.Counts(now)
		if now%(7*w.BucketWidth()) == 0 {
			tl.Reset()
		}
	})
	alloctest.RequireNone(t, bytes, objects, unsafe.Sizeof(metrics.Histogram{}), "a tally in use")
}
