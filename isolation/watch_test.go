package isolation

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/deadline"
)

// The tests here drive a Pool with the *deadline.Context that command gives its calls with a
// timeout: the Pool's watch, not the context's own timer, wakes the caller.

// watchEmpty reports whether no job is left on p's watch.
func watchEmpty(p *Pool) bool {
	p.watch.mu.Lock()
	defer p.watch.mu.Unlock()
	return p.watch.head == nil && p.watch.tail == nil
}

func TestPoolDeadlineContextDetachesAtTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		name   string
		parent func() (context.Context, context.CancelFunc)
	}{
		{"parent that never ends", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
		{"parent that can end", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPool(t, PoolConfig{Size: 1})
			parent, cancel := tc.parent()
			defer cancel()
			woke := make(chan error, 1)
			release := make(chan struct{})
			dl := deadline.New(parent, 50*time.Millisecond)
			defer dl.Cancel()
			start := time.Now()
			err := p.Execute(dl, func(ctx context.Context) {
				select {
				case <-ctx.Done(): // Run's own wait on its context wakes at the deadline too
					woke <- ctx.Err()
				case <-time.After(5 * time.Second):
					woke <- errors.New("work not woken")
				}
				select { // and the work goes on: only the watch can answer the caller
				case <-release:
				case <-time.After(5 * time.Second):
				}
			})
			close(release)
			took := time.Since(start)
			require.ErrorIs(t, err, ErrDetached)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.GreaterOrEqual(t, took, 45*time.Millisecond, "answered before the deadline")
			assert.True(t, dl.Expired())
			assert.Equal(t, context.DeadlineExceeded, <-woke)
			eventually(t, func() bool { return p.Stats().Detached == 0 }, "detached work not counted out")
			assert.True(t, watchEmpty(p))
		})
	}
}

// TestPoolWatchWakesEachCallerAtItsOwnDeadline: callers whose deadlines come in the reverse
// order of their calls (each inserted before the others on the watch) are each woken at their
// own deadline, not before, and none is forgotten.
func TestPoolWatchWakesEachCallerAtItsOwnDeadline(t *testing.T) {
	const n = 8
	p := newTestPool(t, PoolConfig{Size: n})
	g := newGate()
	defer g.open()
	type answer struct {
		timeout, took time.Duration
		err           error
	}
	answers := make(chan answer, n)
	for i := range n {
		timeout := time.Duration(n-i) * 30 * time.Millisecond
		dl := deadline.New(context.Background(), timeout)
		start := time.Now()
		go func() {
			defer dl.Cancel()
			err := p.Execute(dl, g.work)
			answers <- answer{timeout, time.Since(start), err}
		}()
		g.waitStarted(t, 1) // one at a time, so that each is inserted before the others
	}
	for range n {
		var a answer
		select {
		case a = <-answers:
		case <-time.After(5 * time.Second):
			t.Fatal("a caller was not woken at its deadline")
		}
		assert.ErrorIs(t, a.err, ErrDetached, "timeout %v", a.timeout)
		assert.GreaterOrEqual(t, a.took, a.timeout-5*time.Millisecond, "woken before its deadline")
	}
	assert.True(t, watchEmpty(p))
}

func TestPoolDeadlineContextParentCancel(t *testing.T) {
	p := newTestPool(t, PoolConfig{Size: 1})
	g := newGate()
	defer g.open()
	parent, cancel := context.WithCancelCause(context.Background())
	dl := deadline.New(parent, time.Hour)
	defer dl.Cancel()
	ch := async(p, dl, g.work)
	g.waitStarted(t, 1)
	cancel(errors.New("client gone"))
	err := receive(t, ch)
	require.ErrorIs(t, err, ErrDetached)
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, dl.Expired())
	assert.True(t, watchEmpty(p))
}

func TestPoolDeadlineContextResultBeforeTheDeadline(t *testing.T) {
	p := newTestPool(t, PoolConfig{Size: 2})
	for range 100 {
		dl := deadline.New(context.Background(), time.Hour)
		ran := false
		require.NoError(t, p.Execute(dl, func(context.Context) { ran = true }))
		assert.True(t, ran)
		assert.NoError(t, dl.Err())
		dl.Cancel()
	}
	assert.True(t, watchEmpty(p))
}

// TestPoolDeadlineContextQueuedCallDropped: a call queued behind busy workers leaves the queue
// at its deadline and its work never runs.
func TestPoolDeadlineContextQueuedCallDropped(t *testing.T) {
	p := newTestPool(t, PoolConfig{Size: 1, Queue: 1})
	g := newGate()
	defer g.open()
	busy := async(p, context.Background(), g.work)
	g.waitStarted(t, 1)
	dl := deadline.New(context.Background(), 20*time.Millisecond)
	defer dl.Cancel()
	err := p.Execute(dl, func(context.Context) { t.Error("a dropped call ran") })
	require.ErrorIs(t, err, ErrDropped)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	g.open()
	require.NoError(t, receive(t, busy))
	assert.True(t, watchEmpty(p))
}

// TestPoolDeadlineContextWakeRacesResult: work that takes about as long as the timeout makes
// the watch's wake and the worker's result race; every call gets one answer, the books
// balance, and the jobs go back clean (a signal left behind would answer a later call before
// its work ran: the sequential calls at the end would see it).
func TestPoolDeadlineContextWakeRacesResult(t *testing.T) {
	p := newTestPool(t, PoolConfig{Size: 4, Queue: 4})
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]int{}
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 200 {
				var ctx context.Context = parent
				if (i+k)%2 == 0 {
					ctx = context.Background()
				}
				dl := deadline.New(ctx, 200*time.Microsecond)
				err := p.Execute(dl, func(context.Context) { time.Sleep(200 * time.Microsecond) })
				dl.Cancel()
				kind := "result"
				switch {
				case errors.Is(err, ErrDetached):
					kind = "detached"
				case errors.Is(err, ErrDropped):
					kind = "dropped"
				case err != nil:
					t.Errorf("unexpected error %v", err)
				}
				mu.Lock()
				answers[kind]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("answers: %v", answers)
	assert.Equal(t, 800, answers["result"]+answers["detached"]+answers["dropped"])
	eventually(t, func() bool { return p.Stats().Active == 0 && p.Stats().Detached == 0 }, "work still running")
	assert.True(t, watchEmpty(p))
	for range 50 {
		dl := deadline.New(context.Background(), time.Hour)
		ran := false
		require.NoError(t, p.Execute(dl, func(context.Context) { ran = true }))
		require.True(t, ran, "answered before the work ran: a stale signal")
		dl.Cancel()
	}
}
