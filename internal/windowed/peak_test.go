package windowed

import (
	"math"
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
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 13))
		w := []metrics.Window{{Length: time.Second, Buckets: 10}, {Length: 3 * time.Millisecond, Buckets: 3},
			{Length: time.Duration(1<<20) * 8, Buckets: 8}}[rng.IntN(3)]
		p, err := NewPeak(w)
		require.NoError(t, err)
		r, err := metrics.NewRolling(w, metrics.CountsOnly)
		require.NoError(t, err)
		require.Equal(t, w, p.Window())
		width, n := int64(w.BucketWidth()), int64(w.Buckets)
		bases := []int64{0, -5 * width, 1 << 62, -(1 << 62), math.MaxInt64 - 3*width, math.MinInt64 + 2*width}
		now := bases[rng.IntN(len(bases))]
		for step := range 400 {
			switch x := rng.IntN(10); {
			case x < 4:
				now += rng.Int64N(width / 2)
			case x < 6:
				now = (now/width+1)*width - rng.Int64N(2) // an edge, or just below it
			case x < 7:
				now -= rng.Int64N(2 * width * n)
			case x < 8:
				now += rng.Int64N(2 * width * n)
			}
			v := rng.Int64N(100)
			p.ObserveMax(time.Duration(now), v)
			r.ObserveMax(time.Duration(now), v)
			for _, at := range []time.Duration{time.Duration(now + rng.Int64N(width*n) - width), time.Duration(now - rng.Int64N(2*width*n))} {
				require.Equal(t, r.Snapshot(at).Max, p.Max(at), "seed %d step %d: Max(%d) after %d at %d", seed, step, at, v, now)
			}
		}
	}
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
