package isolation

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTestSemaphore(t *testing.T, max int) *Semaphore {
	t.Helper()
	s, err := NewSemaphore(max)
	require.NoError(t, err)
	return s
}

func TestNewSemaphoreDefaultsAndValidation(t *testing.T) {
	s := newTestSemaphore(t, 0)
	st := s.Stats()
	assert.Equal(t, DefaultSemaphoreMax, st.Capacity)
	assert.Zero(t, st.QueueCapacity)

	_, err := NewSemaphore(-1)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.ErrorContains(t, err, "max = -1")
}

func TestSemaphoreTryAcquireRelease(t *testing.T) {
	s := newTestSemaphore(t, 2)
	require.True(t, s.TryAcquire())
	require.True(t, s.TryAcquire())
	assert.False(t, s.TryAcquire())
	assert.Equal(t, 2, s.Stats().Active)
	s.Release()
	assert.True(t, s.TryAcquire())
	s.Release()
	s.Release()

	st := s.Stats()
	assert.Zero(t, st.Active)
	assert.Equal(t, 2, st.LargestActive)
	assert.Equal(t, int64(3), st.Completed)
	assert.Equal(t, int64(1), st.Rejected)
	assert.PanicsWithValue(t, "isolation: Semaphore released more permits than were acquired", s.Release)
}

// limitHolds runs goroutines×calls Executes of a work that tracks how many run at once, and
// returns the highest count and how many calls ran.
func limitHolds(t *testing.T, b Bulkhead, goroutines, calls int) (highest, ran, rejected int64) {
	t.Helper()
	var cur, maxCur, ranN, rejectedN atomic.Int64
	work := func(context.Context) {
		n := cur.Add(1)
		for m := maxCur.Load(); n > m && !maxCur.CompareAndSwap(m, n); m = maxCur.Load() {
		}
		runtime.Gosched()
		cur.Add(-1)
		ranN.Add(1)
	}
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				switch err := b.Execute(context.Background(), work); {
				case err == nil:
				case errors.Is(err, ErrRejected):
					rejectedN.Add(1)
				default:
					t.Errorf("unexpected error %v", err)
				}
			}
		}()
	}
	wg.Wait()
	return maxCur.Load(), ranN.Load(), rejectedN.Load()
}

func TestSemaphoreLimitIsExactUnderContention(t *testing.T) {
	s := newTestSemaphore(t, 3)
	highest, ran, rejected := limitHolds(t, s, 32, 2000)
	assert.LessOrEqual(t, highest, int64(3))
	assert.Equal(t, int64(32*2000), ran+rejected)
	st := s.Stats()
	assert.Equal(t, ran, st.Completed)
	assert.Equal(t, rejected, st.Rejected)
	assert.LessOrEqual(t, st.LargestActive, 3)
	assert.Zero(t, st.Active)
}

func TestSemaphoreAsFallbackLimiter(t *testing.T) {
	limiter := newTestSemaphore(t, 0) // Hystrix's fallback default: 10
	var cur, maxCur atomic.Int64
	var served, refused atomic.Int64
	fallback := func() {
		if !limiter.TryAcquire() {
			refused.Add(1)
			return
		}
		defer limiter.Release()
		n := cur.Add(1)
		for m := maxCur.Load(); n > m && !maxCur.CompareAndSwap(m, n); m = maxCur.Load() {
		}
		time.Sleep(50 * time.Microsecond)
		cur.Add(-1)
		served.Add(1)
	}
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				fallback()
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, maxCur.Load(), int64(DefaultSemaphoreMax))
	assert.Positive(t, refused.Load(), "64 callers against 10 permits must see refusals")
	assert.Equal(t, int64(64*200), served.Load()+refused.Load())
	assert.Equal(t, refused.Load(), limiter.Stats().Rejected)
}

func TestSemaphoreRecoversPanics(t *testing.T) {
	s := newTestSemaphore(t, 1)
	err := s.Execute(context.Background(), func(context.Context) { panicInWork() })
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "boom", pe.Value)
	assert.Contains(t, string(pe.Stack), "panicInWork")
	assert.Zero(t, s.Stats().Active, "permit released")
	assert.NoError(t, s.Execute(context.Background(), func(context.Context) {}))
}

func TestSemaphoreReleasesPermitOnGoexit(t *testing.T) {
	s := newTestSemaphore(t, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Execute(context.Background(), func(context.Context) { runtime.Goexit() })
	}()
	<-done
	assert.Zero(t, s.Stats().Active)
}

func TestSemaphoreRunsOnCallerGoroutineWithoutDetaching(t *testing.T) {
	s := newTestSemaphore(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.Execute(ctx, func(context.Context) { time.Sleep(60 * time.Millisecond) })
	assert.NoError(t, err, "the semaphore does not detach: the work's return is the call's end")
	assert.GreaterOrEqual(t, time.Since(start), 60*time.Millisecond)

	var ran bool
	assert.ErrorIs(t, s.Execute(ctx, func(context.Context) { ran = true }), ErrDropped, "ctx already ended")
	assert.False(t, ran)
}

func TestSemaphoreRejectsWhenFull(t *testing.T) {
	s := newTestSemaphore(t, 1)
	require.True(t, s.TryAcquire())
	assert.ErrorIs(t, s.Execute(context.Background(), func(context.Context) { t.Error("ran") }), ErrRejected)
	s.Release()
}

func TestSemaphoreResize(t *testing.T) {
	s := newTestSemaphore(t, 1)
	require.True(t, s.TryAcquire())
	assert.False(t, s.TryAcquire())
	require.NoError(t, s.Resize(2))
	assert.True(t, s.TryAcquire())
	require.NoError(t, s.Resize(1))
	assert.Equal(t, 2, s.Stats().Active, "permits taken stay taken")
	s.Release()
	assert.False(t, s.TryAcquire(), "still at the new max")
	s.Release()
	assert.True(t, s.TryAcquire())
	s.Release()

	assert.ErrorIs(t, s.Resize(0), ErrInvalidConfig)
	assert.ErrorIs(t, s.Resize(-3), ErrInvalidConfig)
	assert.Equal(t, 1, s.Stats().Capacity)
}

func TestSemaphoreClose(t *testing.T) {
	s := newTestSemaphore(t, 2)
	require.True(t, s.TryAcquire())

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := s.Close(ctx)
	var ce *CloseError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 1, ce.Running)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	assert.False(t, s.TryAcquire())
	assert.ErrorIs(t, s.Execute(context.Background(), func(context.Context) { t.Error("ran") }), ErrClosed)
	assert.ErrorIs(t, s.Close(context.Background()), ErrClosed)
	assert.ErrorIs(t, s.Resize(3), ErrClosed)
	assert.Zero(t, s.Stats().Rejected, "refusals after Close are not rejections")
	s.Release()
	assert.Zero(t, s.Stats().Active)
}

func TestSemaphoreCloseWaitsForPermits(t *testing.T) {
	s := newTestSemaphore(t, 2)
	require.True(t, s.TryAcquire())
	closed := make(chan error, 1)
	go func() { closed <- s.Close(context.Background()) }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned %v with a permit held", err)
	case <-time.After(20 * time.Millisecond):
	}
	s.Release()
	require.NoError(t, receive(t, closed))
}

func TestSemaphoreExecuteDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	s := newTestSemaphore(t, 4)
	n := 0
	allocs := testing.AllocsPerRun(1000, func() {
		_ = s.Execute(context.Background(), func(context.Context) { n++ })
	})
	assert.Zero(t, allocs)
	assert.Equal(t, 1001, n)
}
