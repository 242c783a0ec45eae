package isolation

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func newTestWorkers(t *testing.T) *Workers {
	t.Helper()
	w, err := NewWorkers(nil)
	require.NoError(t, err)
	return w
}

// TestWorkersIdlePoolsRunNoGoroutine: Pools on shared Workers start no goroutine of their own,
// where each Pool with workers of its own starts two (ants' clock and purge).
func TestWorkersIdlePoolsRunNoGoroutine(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	w := newTestWorkers(t)
	before := runtime.NumGoroutine()
	pools := make([]*Pool, 100)
	for i := range pools {
		p, err := NewPool(PoolConfig{Size: 2, Workers: w})
		require.NoError(t, err)
		pools[i] = p
	}
	assert.Equal(t, before, runtime.NumGoroutine(), "100 idle pools on shared workers")

	own, err := NewPool(PoolConfig{Size: 2})
	require.NoError(t, err)
	assert.Equal(t, before+2, runtime.NumGoroutine(), "one pool with workers of its own")
	require.NoError(t, own.Close(context.Background()))

	for _, p := range pools {
		require.NoError(t, p.Execute(context.Background(), func(context.Context) {}))
		require.NoError(t, p.Close(context.Background()))
	}
	require.NoError(t, w.Close(context.Background()))
	goleak.VerifyNone(t, ignore)
	assert.ErrorIs(t, w.Close(context.Background()), ErrClosed)
	_, err = NewPool(PoolConfig{Workers: w})
	assert.ErrorIs(t, err, ErrClosed, "NewPool on closed Workers")
}

// TestWorkersPoolsKeepTheirOwnAdmission: two Pools on one set of workers each admit up to their
// own size; one full Pool does not refuse the other's calls.
func TestWorkersPoolsKeepTheirOwnAdmission(t *testing.T) {
	w := newTestWorkers(t)
	a, err := NewPool(PoolConfig{Size: 1, Workers: w})
	require.NoError(t, err)
	b, err := NewPool(PoolConfig{Size: 2, Workers: w})
	require.NoError(t, err)
	g := newGate()
	defer g.open()
	ranA := async(a, context.Background(), g.work)
	g.waitStarted(t, 1)
	assert.ErrorIs(t, a.Execute(context.Background(), g.work), ErrRejected, "a is full")
	ranB := []<-chan error{async(b, context.Background(), g.work), async(b, context.Background(), g.work)}
	g.waitStarted(t, 2)
	assert.ErrorIs(t, b.Execute(context.Background(), g.work), ErrRejected, "b is full")
	g.open()
	for _, c := range append(ranB, ranA) {
		assert.NoError(t, receive(t, c))
	}
	require.NoError(t, a.Close(context.Background()))
	require.NoError(t, b.Close(context.Background()))
	require.NoError(t, w.Close(context.Background()))
}

// TestWorkersCloseWaitsForPoolsStillClosing: Workers.Close waits for a Pool whose Close is
// still draining a running call, and ends the goroutines once it has.
func TestWorkersCloseWaitsForPoolsStillClosing(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	w := newTestWorkers(t)
	p, err := NewPool(PoolConfig{Size: 1, Queue: 1, Workers: w})
	require.NoError(t, err)
	g := newGate()
	defer g.open()
	running := async(p, context.Background(), g.work)
	g.waitStarted(t, 1)
	queued := async(p, context.Background(), func(context.Context) {})
	eventually(t, func() bool { return p.Stats().Queued == 1 }, "one queued")
	poolClosed := make(chan error, 1)
	go func() { poolClosed <- p.Close(context.Background()) }()
	eventually(t, func() bool {
		return errors.Is(p.Execute(context.Background(), g.work), ErrClosed)
	}, "the pool's Close has begun")
	workersClosed := make(chan error, 1)
	go func() { workersClosed <- w.Close(context.Background()) }()
	eventually(t, func() bool {
		// A probe that beats Close attaches a pool: close it, or Close rightly waits for it.
		probe, err := NewPool(PoolConfig{Workers: w})
		if err == nil {
			require.NoError(t, probe.Close(context.Background()))
		}
		return errors.Is(err, ErrClosed)
	}, "Workers.Close has begun")
	select {
	case err := <-workersClosed:
		t.Fatalf("Workers.Close returned %v while a pool was still draining", err)
	default:
	}
	g.open()
	assert.NoError(t, receive(t, running))
	assert.NoError(t, receive(t, queued), "the queued call still gets a worker")
	assert.NoError(t, receive(t, poolClosed))
	assert.NoError(t, receive(t, workersClosed))
	goleak.VerifyNone(t, ignore)
}

// TestWorkersCloseBoundedByContext: a Pool left open makes Workers.Close return ctx's error
// once ctx ends; the open Pool's later calls get ErrClosed.
func TestWorkersCloseBoundedByContext(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	w := newTestWorkers(t)
	p, err := NewPool(PoolConfig{Size: 1, Workers: w})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err = w.Close(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "1 pools still open")
	assert.ErrorIs(t, p.Execute(context.Background(), func(context.Context) { t.Error("ran on released workers") }), ErrClosed)
	require.NoError(t, p.Close(context.Background()))
	eventually(t, func() bool { return goleak.Find(ignore) == nil }, "the released workers exit")
}

// TestWorkersCloseAfterACutOffPool: a detached call still running when its Pool's Close was cut
// off keeps its goroutine; Workers.Close does not wait for it, and it exits once its work
// returns.
func TestWorkersCloseAfterACutOffPool(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	w := newTestWorkers(t)
	p, err := NewPool(PoolConfig{Size: 1, Workers: w})
	require.NoError(t, err)
	g := newGate()
	defer g.open()
	ctx, cancel := context.WithCancel(context.Background())
	call := async(p, ctx, g.work)
	g.waitStarted(t, 1)
	cancel()
	assert.ErrorIs(t, receive(t, call), ErrDetached)

	cut, stop := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer stop()
	var ce *CloseError
	require.ErrorAs(t, p.Close(cut), &ce)
	assert.Equal(t, 1, ce.Running)
	require.NoError(t, w.Close(context.Background()), "nothing is left open")
	g.open()
	eventually(t, func() bool { return goleak.Find(ignore) == nil }, "the detached call's goroutine exits")
}
