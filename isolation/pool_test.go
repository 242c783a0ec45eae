package isolation

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/bulwark-go/bulwark/internal/logtest"
)

// newTestPool returns a Pool that is closed (and checked to close cleanly, unless the test
// closed it itself) when the test ends.
func newTestPool(t *testing.T, cfg PoolConfig) *Pool {
	t.Helper()
	p, err := NewPool(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Close(ctx); !errors.Is(err, ErrClosed) {
			assert.NoError(t, err)
		}
	})
	return p
}

// gate is work that blocks until released (or a second passes, so a failing test cannot hang).
type gate struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGate() *gate {
	return &gate{started: make(chan struct{}, 16), release: make(chan struct{})}
}

func (g *gate) work(context.Context) {
	g.started <- struct{}{}
	select {
	case <-g.release:
	case <-time.After(time.Second):
	}
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// waitStarted waits for n works of the gate to start.
func (g *gate) waitStarted(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-g.started:
		case <-time.After(5 * time.Second):
			t.Fatal("work did not start")
		}
	}
}

// eventually polls cond every millisecond for up to 5 s.
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, time.Millisecond, msg)
}

// async runs Execute on another goroutine and returns a channel with its error.
func async(p Bulkhead, ctx context.Context, work func(context.Context)) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- p.Execute(ctx, work) }()
	return ch
}

func receive(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("Execute did not return")
		return nil
	}
}

// executeTimeout runs p.Execute with a context that times out after d, and returns how long
// the call took and its error. On a loaded machine handing the work to a worker can take
// longer than d, and the call is then, rightly, dropped before the work starts: such attempts
// are retried (up to 20), so that the test looks at a call whose work did start.
func executeTimeout(t *testing.T, p *Pool, d time.Duration, work func(context.Context)) (time.Duration, error) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), d)
		err := p.Execute(ctx, work)
		took := time.Since(start)
		cancel()
		if !errors.Is(err, ErrDropped) || attempt == 20 {
			return took, err
		}
		t.Logf("attempt %d dropped before the work started (machine busy), retrying", attempt)
	}
}

func TestPoolConfigDefaultsAndValidation(t *testing.T) {
	p := newTestPool(t, PoolConfig{})
	s := p.Stats()
	assert.Equal(t, DefaultPoolSize, s.Capacity)
	assert.Zero(t, s.QueueCapacity)

	for _, c := range []struct {
		cfg  PoolConfig
		want string
	}{
		{PoolConfig{Size: -1}, "Size = -1"},
		{PoolConfig{Queue: -2}, "Queue = -2"},
		{PoolConfig{Size: maxCapacity + 1}, "Size = 2147483648"},
	} {
		_, err := NewPool(c.cfg)
		assert.ErrorIs(t, err, ErrInvalidConfig)
		assert.ErrorContains(t, err, c.want)
	}
}

type ctxKey struct{}

func TestPoolRunsWorkOnWorkerWithCallersContext(t *testing.T) {
	p := newTestPool(t, PoolConfig{Size: 2})
	ctx := context.WithValue(context.Background(), ctxKey{}, "caller")
	var got any
	require.NoError(t, p.Execute(ctx, func(ctx context.Context) { got = ctx.Value(ctxKey{}) }))
	assert.Equal(t, "caller", got)
	s := p.Stats()
	assert.Equal(t, int64(1), s.Completed)
	assert.Equal(t, 1, s.LargestActive)
}

func TestPoolRejectsAtOnceWhenPoolAndQueueAreFull(t *testing.T) {
	p := newTestPool(t, PoolConfig{Size: 1, Queue: 1})
	g := newGate()
	defer g.open()
	running := async(p, context.Background(), g.work)
	g.waitStarted(t, 1)
	queued := async(p, context.Background(), g.work)
	eventually(t, func() bool { return p.Stats().Queued == 1 }, "second call queued")

	start := time.Now()
	err := p.Execute(context.Background(), func(context.Context) { t.Error("rejected work ran") })
	assert.ErrorIs(t, err, ErrRejected)
	assert.Less(t, time.Since(start), 250*time.Millisecond, "rejection must not block")
	assert.Equal(t, int64(1), p.Stats().Rejected)

	g.open()
	assert.NoError(t, receive(t, running))
	assert.NoError(t, receive(t, queued))
}

func TestPoolNoQueueRejectsWhenBusy(t *testing.T) {
	p := newTestPool(t, PoolConfig{Size: 1})
	g := newGate()
	defer g.open()
	running := async(p, context.Background(), g.work)
	g.waitStarted(t, 1)
	assert.ErrorIs(t, p.Execute(context.Background(), g.work), ErrRejected)
	g.open()
	assert.NoError(t, receive(t, running))
}

func TestPoolQueuedCallTimesOutAndNeverRuns(t *testing.T) {
	p := newTestPool(t, PoolConfig{Size: 1, Queue: 1})
	g := newGate() // the pool is busy for up to 1 s
	defer g.open()
	busy := async(p, context.Background(), g.work)
	g.waitStarted(t, 1)

	var ran atomic.Bool
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := p.Execute(ctx, func(context.Context) { ran.Store(true) })
	took := time.Since(start)

	assert.ErrorIs(t, err, ErrDropped)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.GreaterOrEqual(t, took, 50*time.Millisecond)
	assert.Less(t, took, 500*time.Millisecond)
	assert.Zero(t, p.Stats().Queued, "the dropped call left the queue")

	g.open()
	require.NoError(t, receive(t, busy))
	eventually(t, func() bool { return p.Stats().Active == 0 }, "pool idle")
	assert.False(t, ran.Load(), "dropped work must never run")
	assert.Equal(t, int64(1), p.Stats().Completed)
}

func TestPoolCallWithEndedContextNeverRuns(t *testing.T) {
	p := newTestPool(t, PoolConfig{Size: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var ran atomic.Bool
	err := p.Execute(ctx, func(context.Context) { ran.Store(true) })
	assert.ErrorIs(t, err, ErrDropped)
	assert.ErrorIs(t, err, context.Canceled)
	eventually(t, func() bool { return p.Stats().Active == 0 }, "pool idle")
	assert.False(t, ran.Load())
}

func TestPoolQueueIsFIFO(t *testing.T) {
	p := newTestPool(t, PoolConfig{Size: 1, Queue: 5})
	g := newGate()
	defer g.open()
	first := async(p, context.Background(), g.work)
	g.waitStarted(t, 1)

	var mu sync.Mutex
	var order []int
	var waits []<-chan error
	for i := range 5 {
		waits = append(waits, async(p, context.Background(), func(context.Context) {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		}))
		eventually(t, func() bool { return p.Stats().Queued == i+1 }, "call queued")
	}
	g.open()
	require.NoError(t, receive(t, first))
	for _, w := range waits {
		require.NoError(t, receive(t, w))
	}
	assert.Equal(t, []int{0, 1, 2, 3, 4}, order)
}

func TestPoolDetachesNonCooperativeWork(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	p, err := NewPool(PoolConfig{Size: 1})
	require.NoError(t, err)
	require.NoError(t, p.Execute(context.Background(), func(context.Context) {}))
	baseline := runtime.NumGoroutine() // one idle worker and the ants housekeeping

	ended := make(chan struct{})
	var workCtx context.Context
	// A deadline long enough for the worker to start even on a loaded
	// machine (else the call is dropped, not detached), and work far longer.
	took, err := executeTimeout(t, p, 200*time.Millisecond, func(ctx context.Context) {
		workCtx = ctx
		time.Sleep(1500 * time.Millisecond) // ignores its context
		close(ended)
	})

	assert.ErrorIs(t, err, ErrDetached)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.GreaterOrEqual(t, took, 200*time.Millisecond)
	assert.Less(t, took, 1200*time.Millisecond, "the caller is released at its deadline")

	s := p.Stats()
	assert.Equal(t, 1, s.Detached)
	assert.Equal(t, 1, s.Active, "detached work keeps its slot")
	assert.ErrorIs(t, p.Execute(context.Background(), func(context.Context) {
		t.Error("ran beside detached work")
	}), ErrRejected)

	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("detached work did not finish")
	}
	eventually(t, func() bool { return p.Stats().Detached == 0 && p.Stats().Active == 0 }, "slot freed")
	assert.Error(t, workCtx.Err(), "work ran with the caller's (ended) context")
	// Polled here rather than with require.Eventually, whose checks run on goroutines of their own.
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > baseline; {
		require.True(t, time.Now().Before(deadline), "goroutines: %d, baseline %d", runtime.NumGoroutine(), baseline)
		time.Sleep(time.Millisecond)
	}
	assert.Equal(t, int64(2), p.Stats().Completed)

	require.NoError(t, p.Close(context.Background()))
	goleak.VerifyNone(t, ignore)
}

func TestPoolDetachedWorkDelaysQueuedCall(t *testing.T) {
	p := newTestPool(t, PoolConfig{Size: 1, Queue: 1})
	var ended atomic.Bool
	_, err := executeTimeout(t, p, 20*time.Millisecond, func(context.Context) {
		time.Sleep(200 * time.Millisecond)
		ended.Store(true)
	})
	require.ErrorIs(t, err, ErrDetached)

	var endedBefore atomic.Bool
	require.NoError(t, p.Execute(context.Background(), func(context.Context) {
		endedBefore.Store(ended.Load())
	}))
	assert.True(t, endedBefore.Load(), "queued call ran only after the detached work returned")
}

func TestPoolBulkheadHoldsAfterTimeouts(t *testing.T) {
	p := newTestPool(t, PoolConfig{Size: 2, Queue: 2})
	var running, maxRunning atomic.Int64
	var wg sync.WaitGroup
	release := make(chan struct{}) // the works ignore their context until every call is made
	work := func(context.Context) {
		defer wg.Done()
		n := running.Add(1)
		for m := maxRunning.Load(); n > m && !maxRunning.CompareAndSwap(m, n); m = maxRunning.Load() {
		}
		<-release
		running.Add(-1)
	}
	var detachedN, refused int
	for range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		wg.Add(1)
		err := p.Execute(ctx, work)
		cancel()
		switch {
		case errors.Is(err, ErrDetached):
			detachedN++
		case errors.Is(err, ErrRejected), errors.Is(err, ErrDropped):
			wg.Done() // never ran
			refused++
		default:
			t.Fatalf("unexpected result %v", err)
		}
		assert.LessOrEqual(t, p.Stats().Active, 2)
	}
	close(release)
	wg.Wait()
	assert.LessOrEqual(t, maxRunning.Load(), int64(2), "never more than Size works at once")
	assert.Positive(t, detachedN)
	assert.Positive(t, refused, "timed-out work kept the slots, so later calls were refused")
	assert.Equal(t, 10, detachedN+refused)
	assert.LessOrEqual(t, p.Stats().LargestActive, 2)
}

func TestPoolRecoversPanics(t *testing.T) {
	p := newTestPool(t, PoolConfig{Size: 1})
	err := p.Execute(context.Background(), func(context.Context) { panicInWork() })
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "boom", pe.Value)
	assert.Contains(t, string(pe.Stack), "panicInWork")

	err = p.Execute(context.Background(), func(context.Context) { panic(context.Canceled) })
	assert.ErrorIs(t, err, context.Canceled, "an error value stays reachable")

	assert.NoError(t, p.Execute(context.Background(), func(context.Context) {}), "pool still works")
	assert.Equal(t, int64(3), p.Stats().Completed)
}

func panicInWork() { panic("boom") }

// TestPoolSequentialCallsFindTheSlotFree: a call's slot is free again by the time its caller
// learns the result, so a caller calling again at once on a pool of one is never rejected
// and, with nothing else running, sees the pool idle. (The worker used to publish the result
// first and release its slot after: most such calls were rejected.)
func TestPoolSequentialCallsFindTheSlotFree(t *testing.T) {
	scale := 1
	if testing.Short() {
		scale = 10
	}
	// A panic costs a stack trace (tens of µs): fewer of those calls.
	for _, c := range []struct {
		name  string
		queue int
		calls int
		work  func(context.Context)
		want  func(error) bool
	}{
		{"no queue", 0, 100_000, func(context.Context) {}, func(err error) bool { return err == nil }},
		{"queue", 4, 100_000, func(context.Context) {}, func(err error) bool { return err == nil }},
		{"panicking work", 0, 10_000, func(context.Context) { panic("boom") }, isPanic},
		{"Goexit in work", 0, 10_000, func(context.Context) { runtime.Goexit() }, isPanic},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := c.calls / scale
			p := newTestPool(t, PoolConfig{Size: 1, Queue: c.queue})
			for i := range calls {
				if err := p.Execute(context.Background(), c.work); !c.want(err) {
					t.Fatalf("call %d of %d returned %v", i+1, calls, err)
				}
			}
			// Again, looking at the gauges between calls (which also gives a worker that
			// still held its slot the time to let go, so the calls above would not fail).
			for i := range calls {
				if err := p.Execute(context.Background(), c.work); !c.want(err) {
					t.Fatalf("call %d of %d returned %v", i+1, calls, err)
				}
				if s := p.Stats(); s.Active != 0 || s.Queued != 0 {
					t.Fatalf("after call %d returned: %d active, %d queued, want an idle pool",
						i+1, s.Active, s.Queued)
				}
			}
			s := p.Stats()
			assert.Equal(t, int64(2*calls), s.Completed)
			assert.Zero(t, s.Rejected)
			assert.Equal(t, 1, s.LargestActive)
		})
	}
}

func isPanic(err error) bool {
	var pe *PanicError
	return errors.As(err, &pe)
}

func TestPoolLogsPanicOfDetachedWork(t *testing.T) {
	var logs logtest.Buffer
	p := newTestPool(t, PoolConfig{Size: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	_, err := executeTimeout(t, p, 10*time.Millisecond, func(context.Context) {
		time.Sleep(100 * time.Millisecond)
		panic("late boom")
	})
	require.ErrorIs(t, err, ErrDetached)
	eventually(t, func() bool { return strings.Contains(logs.String(), "late boom") }, "panic logged")
	assert.Contains(t, logs.String(), "detached work panicked")
	assert.NoError(t, p.Execute(context.Background(), func(context.Context) {}))
}

func TestPoolSurvivesGoexitInWork(t *testing.T) {
	p := newTestPool(t, PoolConfig{Size: 1, Queue: 4})
	g := newGate()
	defer g.open()
	first := async(p, context.Background(), func(ctx context.Context) {
		g.work(ctx)
		runtime.Goexit()
	})
	g.waitStarted(t, 1)
	var ranQueued atomic.Int32
	var queued []<-chan error
	for range 3 {
		queued = append(queued, async(p, context.Background(), func(context.Context) { ranQueued.Add(1) }))
	}
	eventually(t, func() bool { return p.Stats().Queued == 3 }, "calls queued")
	g.open()

	var pe *PanicError
	require.ErrorAs(t, receive(t, first), &pe)
	assert.Equal(t, goexitValue, pe.Value)
	for _, q := range queued {
		assert.NoError(t, receive(t, q), "the queue still drains")
	}
	assert.Equal(t, int32(3), ranQueued.Load())
	eventually(t, func() bool { return p.Stats().Active == 0 }, "slot freed")
}

func TestPoolResize(t *testing.T) {
	p := newTestPool(t, PoolConfig{Size: 1})
	g := newGate()
	defer g.open()
	first := async(p, context.Background(), g.work)
	g.waitStarted(t, 1)
	assert.ErrorIs(t, p.Execute(context.Background(), g.work), ErrRejected)

	require.NoError(t, p.Resize(2, 0))
	second := async(p, context.Background(), g.work)
	g.waitStarted(t, 1)
	assert.Equal(t, 2, p.Stats().Active)

	require.NoError(t, p.Resize(1, 0))
	assert.Equal(t, 2, p.Stats().Active, "running work keeps its slots")
	assert.ErrorIs(t, p.Execute(context.Background(), g.work), ErrRejected)
	g.open()
	require.NoError(t, receive(t, first))
	require.NoError(t, receive(t, second))
	eventually(t, func() bool { return p.Stats().Active == 0 }, "pool idle")

	var cur, maxCur atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = p.Execute(context.Background(), func(context.Context) {
				n := cur.Add(1)
				for m := maxCur.Load(); n > m && !maxCur.CompareAndSwap(m, n); m = maxCur.Load() {
				}
				time.Sleep(time.Millisecond)
				cur.Add(-1)
			})
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(1), maxCur.Load(), "shrunk to one worker")

	assert.ErrorIs(t, p.Resize(0, 0), ErrInvalidConfig)
	assert.ErrorIs(t, p.Resize(1, -1), ErrInvalidConfig)
	s := p.Stats()
	assert.Equal(t, 1, s.Capacity)
	assert.Zero(t, s.QueueCapacity)
}

func TestPoolResizeUpStartsQueuedCalls(t *testing.T) {
	p := newTestPool(t, PoolConfig{Size: 1, Queue: 4})
	g := newGate()
	defer g.open()
	var calls []<-chan error
	for range 4 {
		calls = append(calls, async(p, context.Background(), g.work))
	}
	g.waitStarted(t, 1)
	eventually(t, func() bool { return p.Stats().Queued == 3 }, "three queued")

	require.NoError(t, p.Resize(4, 4))
	g.waitStarted(t, 3) // before anything was released
	s := p.Stats()
	assert.Equal(t, 4, s.Active)
	assert.Zero(t, s.Queued)
	assert.Equal(t, 4, s.QueueCapacity)
	g.open()
	for _, c := range calls {
		assert.NoError(t, receive(t, c))
	}
}

func TestPoolResizeDownQueue(t *testing.T) {
	p := newTestPool(t, PoolConfig{Size: 1, Queue: 3})
	g := newGate()
	defer g.open()
	var calls []<-chan error
	for range 3 {
		calls = append(calls, async(p, context.Background(), g.work))
	}
	g.waitStarted(t, 1)
	eventually(t, func() bool { return p.Stats().Queued == 2 }, "two queued")
	require.NoError(t, p.Resize(1, 1))
	assert.Equal(t, 2, p.Stats().Queued, "queued calls stay")
	assert.ErrorIs(t, p.Execute(context.Background(), g.work), ErrRejected)
	g.open()
	for _, c := range calls {
		assert.NoError(t, receive(t, c))
	}
}

func TestPoolCloseIdle(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	p, err := NewPool(PoolConfig{Size: 2, Queue: 2})
	require.NoError(t, err)
	require.NoError(t, p.Execute(context.Background(), func(context.Context) {}))
	require.NoError(t, p.Close(context.Background()))
	goleak.VerifyNone(t, ignore)

	assert.ErrorIs(t, p.Execute(context.Background(), func(context.Context) { t.Error("ran after Close") }), ErrClosed)
	assert.ErrorIs(t, p.Close(context.Background()), ErrClosed)
	assert.ErrorIs(t, p.Resize(4, 4), ErrClosed)
}

func TestPoolCloseDrainsRunningAndQueued(t *testing.T) {
	p := newTestPool(t, PoolConfig{Size: 1, Queue: 3})
	g := newGate()
	defer g.open()
	var calls []<-chan error
	for range 4 {
		calls = append(calls, async(p, context.Background(), g.work))
	}
	g.waitStarted(t, 1)
	eventually(t, func() bool { return p.Stats().Queued == 3 }, "three queued")

	closed := make(chan error, 1)
	go func() { closed <- p.Close(context.Background()) }()
	eventually(t, func() bool {
		return errors.Is(p.Execute(context.Background(), g.work), ErrClosed)
	}, "Close stops admitting")
	g.open()
	require.NoError(t, receive(t, closed))
	for _, c := range calls {
		assert.NoError(t, receive(t, c), "admitted calls finish")
	}
	assert.Equal(t, int64(4), p.Stats().Completed)
}

func TestPoolCloseReportsWhatItCutOff(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	p, err := NewPool(PoolConfig{Size: 1, Queue: 2})
	require.NoError(t, err)
	g := newGate()
	defer g.open()
	running := async(p, context.Background(), g.work)
	g.waitStarted(t, 1)
	var ranQueued atomic.Bool
	q1 := async(p, context.Background(), func(context.Context) { ranQueued.Store(true) })
	q2 := async(p, context.Background(), func(context.Context) { ranQueued.Store(true) })
	eventually(t, func() bool { return p.Stats().Queued == 2 }, "two queued")

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = p.Close(ctx)
	var ce *CloseError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 2, ce.Dropped)
	assert.Equal(t, 1, ce.Running)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "2 queued calls dropped, 1 calls still running")

	for _, q := range []<-chan error{q1, q2} {
		err := receive(t, q)
		assert.ErrorIs(t, err, ErrDropped)
		assert.ErrorIs(t, err, ErrClosed)
	}
	g.open()
	assert.NoError(t, receive(t, running), "running work finishes on its own")
	assert.False(t, ranQueued.Load())
	goleak.VerifyNone(t, ignore)
}

func TestPoolAntsLogsGoToLogger(t *testing.T) {
	var logs logtest.Buffer
	p := newTestPool(t, PoolConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	antsLogger{p.log}.Printf("worker exits from panic: %v", "x")
	assert.Contains(t, logs.String(), "isolation: ants: worker exits from panic: x")
}

func TestPoolExecuteAllocatesAtMostOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	p := newTestPool(t, PoolConfig{Size: 4})
	work := func(context.Context) {}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		if err := p.Execute(ctx, work); err != nil {
			t.Fatal(err)
		}
	})
	assert.LessOrEqual(t, allocs, 1.0)
}

// TestPoolCloseIdleEndedContext: closing an idle pool with a context that
// has already ended returns nil (there was no call to wait for) and leaves
// no goroutine behind.
func TestPoolCloseIdleEndedContext(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	for range 20 {
		p, err := NewPool(PoolConfig{Size: 2})
		require.NoError(t, err)
		require.NoError(t, p.Execute(context.Background(), func(context.Context) {}))
		// Idle: the worker has let go of its slot (it does so just after
		// its caller got the result).
		require.Eventually(t, func() bool { return p.Stats().Active == 0 }, 5*time.Second, time.Millisecond)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.NoError(t, p.Close(ctx))
	}
	goleak.VerifyNone(t, ignore)
}

// detachedOwned starts ExecuteOwned with work that blocks until release is closed and then
// ends as end says ("return", "panic" or "goexit"), and cancels the caller once the work has
// started. It returns a channel that receives, each time orphaned is called, whether the work
// had produced its result by then, and the caller's error.
func detachedOwned(t *testing.T, p *Pool, end string, release <-chan struct{}) (<-chan bool, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	var produced atomic.Bool
	orphaned := make(chan bool, 2)
	res := make(chan error, 1)
	go func() {
		res <- p.ExecuteOwned(ctx, func(context.Context) {
			close(started)
			<-release
			produced.Store(true)
			switch end {
			case "panic":
				panic("work panics after producing")
			case "goexit":
				runtime.Goexit()
			}
		}, func() { orphaned <- produced.Load() })
	}()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("work did not start")
	}
	cancel()
	return orphaned, receive(t, res)
}

func TestPoolExecuteOwnedHandsADetachedResultToOrphaned(t *testing.T) {
	for _, end := range []string{"return", "panic", "goexit"} {
		t.Run(end, func(t *testing.T) {
			var logs logtest.Buffer
			p := newTestPool(t, PoolConfig{Size: 1, Queue: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			release := make(chan struct{})
			orphaned, err := detachedOwned(t, p, end, release)
			require.ErrorIs(t, err, ErrDetached)
			queued := async(p, context.Background(), func(context.Context) {})
			eventually(t, func() bool { return p.Stats().Queued == 1 }, "a call queued behind the detached work")
			select {
			case <-orphaned:
				t.Fatal("orphaned called before the work returned")
			default:
			}

			close(release)
			select {
			case produced := <-orphaned:
				assert.True(t, produced, "orphaned runs after the work, and owns what it produced")
			case <-time.After(5 * time.Second):
				t.Fatal("orphaned not called")
			}
			require.NoError(t, receive(t, queued), "the worker goes on with the queue")
			eventually(t, func() bool { s := p.Stats(); return s.Active == 0 && s.Detached == 0 }, "slot freed")
			assert.Empty(t, orphaned, "orphaned is called once")
			if end != "return" {
				assert.Contains(t, logs.String(), "detached work panicked")
			}
		})
	}
}

func TestPoolExecuteOwnedLeavesAnAnsweredCallToItsCaller(t *testing.T) {
	never := func() { t.Error("orphaned called for a call whose caller was answered") }
	p := newTestPool(t, PoolConfig{Size: 1, Queue: 1})
	ran := false
	require.NoError(t, p.ExecuteOwned(context.Background(), func(context.Context) { ran = true }, never))
	assert.True(t, ran)
	assert.True(t, isPanic(p.ExecuteOwned(context.Background(), func(context.Context) { panicInWork() }, never)))

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, p.ExecuteOwned(ended, func(context.Context) { t.Error("ran") }, never), ErrDropped)

	g := newGate()
	busy := async(p, context.Background(), g.work)
	g.waitStarted(t, 1)
	ctx, cancelQueued := context.WithCancel(context.Background())
	queued := make(chan error, 1)
	go func() { queued <- p.ExecuteOwned(ctx, func(context.Context) { t.Error("ran") }, never) }()
	eventually(t, func() bool { return p.Stats().Queued == 1 }, "call queued")
	assert.ErrorIs(t, p.ExecuteOwned(context.Background(), func(context.Context) { t.Error("ran") }, never), ErrRejected)
	cancelQueued()
	assert.ErrorIs(t, receive(t, queued), ErrDropped)
	g.open()
	require.NoError(t, receive(t, busy))

	require.NoError(t, p.Close(context.Background()))
	assert.ErrorIs(t, p.ExecuteOwned(context.Background(), func(context.Context) { t.Error("ran") }, never), ErrClosed)
}

// TestPoolCallerWhoseWorkReturnedGetsTheResult: a caller whose context ends after its work
// returned, while the worker is still passing its slot on, waits the moment it takes and
// gets the result; the work is not detached and orphaned is not called.
func TestPoolCallerWhoseWorkReturnedGetsTheResult(t *testing.T) {
	p := newTestPool(t, PoolConfig{Size: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.raceHook = func(at racePoint) {
		if at == workerIdle {
			cancel() // the work has returned; its result is not published yet
			time.Sleep(10 * time.Millisecond)
		}
	}
	produced := 0
	err := p.ExecuteOwned(ctx, func(context.Context) { produced = 42 }, func() { t.Error("orphaned called") })
	require.NoError(t, err)
	assert.Equal(t, 42, produced)
	assert.Zero(t, p.Stats().Detached)
}

func TestPoolOrphanedPanicOrGoexitKeepsThePoolWorking(t *testing.T) {
	for _, end := range []string{"panic", "goexit"} {
		t.Run(end, func(t *testing.T) {
			var logs logtest.Buffer
			p := newTestPool(t, PoolConfig{Size: 1, Queue: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			ctx, cancel := context.WithCancel(context.Background())
			g := newGate()
			res := make(chan error, 1)
			go func() {
				res <- p.ExecuteOwned(ctx, g.work, func() {
					if end == "panic" {
						panic("orphaned panics")
					}
					runtime.Goexit()
				})
			}()
			g.waitStarted(t, 1)
			cancel()
			require.ErrorIs(t, receive(t, res), ErrDetached)
			queued := async(p, context.Background(), func(context.Context) {})
			eventually(t, func() bool { return p.Stats().Queued == 1 }, "call queued")
			g.open()
			require.NoError(t, receive(t, queued), "the queued call still runs")
			eventually(t, func() bool { s := p.Stats(); return s.Active == 0 && s.Detached == 0 }, "slot freed")
			if end == "panic" {
				assert.Contains(t, logs.String(), "orphaned panics")
			}
		})
	}
}
