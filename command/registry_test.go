package command

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
)

// TestRegistryCloseIsFinal: after Close, no group can be created (the
// registry would hold its goroutines until a second Close), and a second
// Close has nothing left to do.
func TestRegistryCloseIsFinal(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	reg := NewRegistry(RegistryConfig{Logger: discardLogger})
	_, err := reg.NewGroup("before", GroupConfig{})
	require.NoError(t, err)
	require.NoError(t, reg.Close(context.Background()))

	g, err := reg.NewGroup("after", GroupConfig{})
	assert.Nil(t, g)
	require.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, err, isolation.ErrClosed, "as the calls of a closed group")
	assert.ErrorContains(t, err, `group "after"`)
	g, err = reg.GroupOrNew("after", GroupConfig{})
	assert.Nil(t, g)
	assert.ErrorIs(t, err, ErrClosed)
	_, ok := reg.Group("before")
	assert.False(t, ok, "closed groups are forgotten")
	goleak.VerifyNone(t, ignore)
	assert.NoError(t, reg.Close(context.Background()))
}

// TestRegistryCloseEndedContext: closing an idle registry with a context
// that has already ended returns nil: nothing was left to wait for.
func TestRegistryCloseEndedContext(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	reg := NewRegistry(RegistryConfig{Logger: discardLogger})
	for _, s := range []Strategy{Thread, Semaphore} {
		g, err := reg.NewGroup(s.String(), GroupConfig{Strategy: s})
		require.NoError(t, err)
		_, err = Execute(context.Background(), g, op[int]{"get", succeed(1)})
		require.NoError(t, err)
		if s == Thread { // idle: the worker has let go of its slot
			require.Eventually(t, func() bool { return g.pool.Stats().Active == 0 }, time.Minute, time.Millisecond)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.NoError(t, reg.Close(ctx))
	goleak.VerifyNone(t, ignore)
}

// TestZeroRegistry: a Registry{} not made by NewRegistry works as
// NewRegistry(RegistryConfig{}) would.
func TestZeroRegistry(t *testing.T) {
	var reg Registry
	g, err := reg.NewGroup("zero", GroupConfig{Strategy: Semaphore})
	require.NoError(t, err)
	v, err := Execute(context.Background(), g, op[int]{"get", succeed(7)})
	require.NoError(t, err)
	assert.Equal(t, 7, v)
	assert.Len(t, reg.Snapshot().Groups, 1)
	require.NoError(t, reg.Close(context.Background()))

	var fresh Registry
	assert.Empty(t, fresh.Snapshot().Groups)
	_, ok := fresh.Group("none")
	assert.False(t, ok)
	assert.NoError(t, fresh.Close(context.Background()))
}

// TestGroupOrNew: concurrent first uses of a name get one group, created
// with the config given; an existing group is returned as is.
func TestGroupOrNew(t *testing.T) {
	reg, _ := newTestRegistry(t)
	const n = 8
	groups := make([]*Group, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var err error
			groups[i], err = reg.GroupOrNew("shared", GroupConfig{Strategy: Semaphore, MaxConcurrent: 3})
			assert.NoError(t, err)
			runtime.Gosched()
		})
	}
	wg.Wait()
	for _, g := range groups {
		assert.Same(t, groups[0], g)
	}
	assert.Equal(t, 3, groups[0].Config().MaxConcurrent)
	g, err := reg.GroupOrNew("shared", GroupConfig{MaxConcurrent: -1})
	require.NoError(t, err, "the config of an existing group is not looked at")
	assert.Same(t, groups[0], g)

	_, err = reg.GroupOrNew("bad", GroupConfig{MaxConcurrent: -1})
	assert.ErrorIs(t, err, ErrInvalidConfig)
	_, err = reg.GroupOrNew("", GroupConfig{})
	assert.ErrorIs(t, err, ErrInvalidConfig)

	require.NoError(t, g.Close(context.Background()))
	fresh, err := reg.GroupOrNew("shared", GroupConfig{Strategy: Semaphore})
	require.NoError(t, err)
	assert.NotSame(t, g, fresh, "a closed group is replaced by a new one")
}

func TestRegistryConfigIsItsGroupsDefaults(t *testing.T) {
	reg, clock := newTestRegistry(t)
	assert.Same(t, clock, reg.Config().Clock)
	logger := slog.New(slog.DiscardHandler)
	hook := &recorder{}
	cfg := NewRegistry(RegistryConfig{Logger: logger, Hook: hook}).Config()
	assert.Same(t, logger, cfg.Logger)
	assert.Equal(t, CallHook(hook), cfg.Hook)
	var zero Registry // the zero Registry is ready to use, on the system clock and the default logger
	assert.True(t, sameClock(zero.Config().Clock, metrics.SystemClock()))
	assert.Same(t, slog.Default(), zero.Config().Logger)
	assert.Nil(t, zero.Config().Hook)
	assert.Nil(t, zero.Config().Exporter)
}

// TestExecuteAfterCloseMatchesErrClosed: a call to a group whose registry
// is closed, or that was closed itself, is refused by its closed bulkhead
// (one primary outcome, the bulkhead's rejection; nothing for the
// breakers), and its error matches ErrClosed (and isolation.ErrClosed),
// not ErrRefused: a shutdown is not a full bulkhead. (It once matched
// only the sentinel of a full bulkhead.) Its fallback, as for any rejection, is given that
// error.
func TestExecuteAfterCloseMatchesErrClosed(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		for _, how := range []string{"registry", "group"} {
			reg := NewRegistry(RegistryConfig{Logger: discardLogger, Clock: new(metrics.ManualClock)})
			g, err := reg.NewGroup("deps", GroupConfig{Strategy: s})
			require.NoError(t, err)
			if how == "registry" {
				require.NoError(t, reg.Close(context.Background()))
			} else {
				require.NoError(t, g.Close(context.Background()))
				t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
			}
			ran := false
			run := func(context.Context) (int, error) { ran = true; return 1, nil }
			v, info, err := ExecuteInfo(context.Background(), g, op[int]{"get", run})
			require.ErrorIs(t, err, ErrClosed, how)
			assert.ErrorIs(t, err, isolation.ErrClosed, how)
			assert.NotErrorIs(t, err, ErrRefused, "%s: a shutdown is not a full bulkhead", how)
			assert.ErrorContains(t, err, "command deps/get")
			assert.Zero(t, v)
			assert.False(t, ran, how)
			assert.Equal(t, g.rejected, info.Event, how)
			assert.Equal(t, events(g.rejected, metrics.FallbackMissing, metrics.ExceptionThrown), info.Events, how)

			var fbErr error
			fb := opFB[int]{op[int]{"get", run}, func(_ context.Context, err error) (int, error) { fbErr = err; return -1, nil }}
			v, err = Execute(context.Background(), g, fb)
			require.NoError(t, err, how)
			assert.Equal(t, -1, v)
			assert.ErrorIs(t, fbErr, ErrClosed, "%s: the fallback can tell a shutdown", how)

			c := g.Snapshot().Commands[0].Metrics.Counts
			assert.EqualValues(t, 2, c[g.rejected], how)
			assert.EqualValues(t, 2, c.Attempts(), "%s: exactly one outcome per call", how)
			assert.Zero(t, g.Breaker().Snapshot().Health.Requests, how)
			_, ok := reg.Group("deps")
			assert.False(t, ok, "%s: a closed group is forgotten", how)
		}
	})
}

// TestQueuedCallDroppedByCloseMatchesErrClosed: a call waiting in a pool's
// queue when Close gives up waiting is dropped, never run, and answered as
// a call after Close is.
func TestQueuedCallDroppedByCloseMatchesErrClosed(t *testing.T) {
	reg := NewRegistry(RegistryConfig{Logger: discardLogger, Clock: new(metrics.ManualClock)})
	g, err := reg.NewGroup("deps", GroupConfig{MaxConcurrent: 1, QueueSize: 1, Timeout: NoTimeout})
	require.NoError(t, err)
	release, running := make(chan struct{}), make(chan struct{})
	blocker := op[int]{"block", func(context.Context) (int, error) { close(running); <-release; return 1, nil }}
	go func() { _, _ = Execute(context.Background(), g, blocker) }()
	receive(t, running, "the blocking call's start")
	queued := make(chan error, 1)
	go func() {
		_, err := Execute(context.Background(), g, op[int]{"get", succeed(1)})
		queued <- err
	}()
	require.Eventually(t, func() bool { return g.pool.Stats().Queued == 1 }, 10*time.Second, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Close drops the queued calls at once
	var ce *isolation.CloseError
	require.ErrorAs(t, reg.Close(ctx), &ce)
	assert.Equal(t, 1, ce.Dropped)
	err = receive(t, queued, "the queued call's answer")
	require.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, err, isolation.ErrDropped)
	assert.NotErrorIs(t, err, ErrRefused)
	close(release)
	assert.EqualValues(t, 1, counts(t, g, "get")[metrics.ThreadPoolRejected])
}
