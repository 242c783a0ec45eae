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

func TestNewPeakRefusesABadWindow(t *testing.T) {
	_, err := NewPeak(metrics.Window{Length: time.Second, Buckets: 3})
	require.ErrorIs(t, err, metrics.ErrInvalidConfig)
}

// A peak keeps what a Rolling's Max keeps: the two, given the same
// observations over the random walk of instants TestRollingMatchesModel
// takes, read the same maximum everywhere in and behind the window.
func TestPeakMatchesRollingMax(t *testing.T) {
	walk(t, 13, func(w metrics.Window, _ *rand.Rand) func(step) {
		p, err := NewPeak(w)
		require.NoError(t, err)
		r, err := metrics.NewRolling(w, metrics.CountsOnly)
		require.NoError(t, err)
		require.Equal(t, w, p.Window())
		return func(s step) {
			v := s.rng.Int64N(100)
			p.ObserveMax(s.now, v)
			r.ObserveMax(s.now, v)
			for _, at := range s.reads {
				require.Equal(t, r.Snapshot(at).Max, p.Max(at), "seed %d step %d: Max(%d) after %d at %d", s.seed, s.i, at, v, s.now)
			}
		}
	})
}

// Observers in one bucket interval, on every core: the peak is the largest
// value any of them observed.
func TestPeakConcurrentObservers(t *testing.T) {
	p, err := NewPeak(metrics.DefaultWindow())
	require.NoError(t, err)
	const observers, per = 16, 20_000
	var clock metrics.ManualClock
	var wg sync.WaitGroup
	for o := range observers {
		wg.Go(func() {
			for i := range per {
				p.ObserveMax(clock.Now(), int64(i*observers+o))
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, observers*per-1, p.Max(clock.Now()))
}

// A peak is its struct, its slots' epochs and its values, the values
// rounded up to whole cache lines; observing, rotating and reading
// allocate nothing.
func TestPeakAllocatesWhatItUses(t *testing.T) {
	w := metrics.DefaultWindow()
	peaks := make([]*Peak, 0, alloctest.Trials*alloctest.Runs)
	bytes, objects := alloctest.Allocated(func() {
		p, err := NewPeak(w)
		require.NoError(t, err)
		peaks = append(peaks, p)
	})
	assert.InDelta(t, 3, objects, 0.1, "the peak, its epochs and its values")
	values := uintptr(cap(peaks[0].maxes)) * unsafe.Sizeof(atomic.Int64{})
	assert.Equal(t, uintptr(cacheline.Size), values, "ten values, in one cache line")
	alloctest.RequireSize(t, unsafe.Sizeof(Peak{})+uintptr(w.Buckets)*8+values, bytes, "a new peak")
	runtime.KeepAlive(peaks)

	p := peaks[0]
	now := time.Duration(0)
	bytes, objects = alloctest.Allocated(func() {
		now += w.BucketWidth() / 3 // through every bucket, rotating
		p.ObserveMax(now, int64(now))
		p.ObserveMax(now-w.Length, 1) // too late for any bucket
		p.Max(now)
	})
	alloctest.RequireNone(t, bytes, objects, unsafe.Sizeof(metrics.Histogram{}), "a peak in use")
}
