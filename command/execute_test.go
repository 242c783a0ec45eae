package command

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command/fallback"
	"github.com/bulwark-go/bulwark/internal/breaker"
	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
)

var errBoom = errors.New("boom")

// strategies runs f once per isolation strategy.
func strategies(t *testing.T, f func(t *testing.T, s Strategy)) {
	for _, s := range []Strategy{Thread, Semaphore} {
		t.Run(s.String(), func(t *testing.T) { f(t, s) })
	}
}

func events(es ...metrics.Event) metrics.EventSet {
	var s metrics.EventSet
	for _, e := range es {
		s.Add(e)
	}
	return s
}

func TestExecuteSuccess(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		g, _ := newTestGroup(t, GroupConfig{Strategy: s})
		v, info, err := ExecuteInfo(context.Background(), g, op[int]{name: "get", run: succeed(42)})
		require.NoError(t, err)
		assert.Equal(t, 42, v)
		assert.Equal(t, Info{Command: "get", Event: metrics.Success, Events: events(metrics.Success), Attempts: 1}, info)
		c := counts(t, g, "get")
		assert.Equal(t, int64(1), c[metrics.Success])
		assert.Equal(t, int64(1), c.Attempts())
		assert.Equal(t, int64(1), g.commands.Load().names.get("get").breaker.Snapshot().Health.Requests)
		assert.Equal(t, int64(1), g.breaker.Snapshot().Health.Requests)
	})
}

func TestExecuteFailureWithFallback(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		g, _ := newTestGroup(t, GroupConfig{Strategy: s})
		var seen error
		cmd := opFB[string]{op[string]{"get", fail[string](errBoom)}, func(_ context.Context, err error) (string, error) {
			seen = err
			return "cached", nil
		}}
		v, info, err := ExecuteInfo(context.Background(), g, cmd)
		require.NoError(t, err)
		assert.Equal(t, "cached", v)
		assert.True(t, info.Degraded)
		assert.Equal(t, metrics.Failure, info.Event)
		assert.Equal(t, events(metrics.Failure, metrics.FallbackSuccess), info.Events)
		require.ErrorIs(t, seen, errBoom, "the fallback sees Run's error")
		var e *Error
		require.ErrorAs(t, seen, &e)
		assert.Equal(t, metrics.Failure, e.Event)
		c := counts(t, g, "get")
		assert.Equal(t, int64(1), c[metrics.Failure])
		assert.Equal(t, int64(1), c[metrics.FallbackSuccess])
		assert.Zero(t, c[metrics.ExceptionThrown])
	})
}

func TestExecuteFailureWithoutFallback(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		g, _ := newTestGroup(t, GroupConfig{Strategy: s})
		runErr := &customErr{"db down"}
		v, info, err := ExecuteInfo(context.Background(), g, op[int]{"get", fail[int](runErr)})
		require.Error(t, err)
		assert.Zero(t, v)
		assert.False(t, info.Degraded)
		assert.Equal(t, events(metrics.Failure, metrics.FallbackMissing, metrics.ExceptionThrown), info.Events)
		assert.ErrorIs(t, err, ErrFallbackMissing)
		var ce *customErr
		require.ErrorAs(t, err, &ce)
		assert.Same(t, runErr, ce)
		assert.Equal(t, "command deps/get: failure: db down (fallback: command: no fallback)", err.Error())
	})
}

type customErr struct{ msg string }

func (e *customErr) Error() string { return e.msg }

func TestExecuteFallbackFails(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore})
	fbErr := errors.New("cache empty")
	cmd := opFB[int]{op[int]{"get", fail[int](errBoom)}, func(context.Context, error) (int, error) { return 7, fbErr }}
	v, info, err := ExecuteInfo(context.Background(), g, cmd)
	assert.Zero(t, v, "a failed fallback's value is not served")
	assert.ErrorIs(t, err, errBoom)
	assert.ErrorIs(t, err, fbErr)
	assert.False(t, info.Degraded)
	assert.Equal(t, events(metrics.Failure, metrics.FallbackFailure, metrics.ExceptionThrown), info.Events)
}

func TestExecuteFallbackDeclines(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore})
	cmd := opFB[int]{op[int]{"get", fail[int](errBoom)}, func(context.Context, error) (int, error) { return 0, ErrFallbackMissing }}
	_, info, err := ExecuteInfo(context.Background(), g, cmd)
	assert.ErrorIs(t, err, ErrFallbackMissing)
	assert.Equal(t, events(metrics.Failure, metrics.FallbackMissing, metrics.ExceptionThrown), info.Events)
}

func TestExecutePanicIsFailureWithStack(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		g, _ := newTestGroup(t, GroupConfig{Strategy: s})
		cmd := op[int]{"get", func(context.Context) (int, error) { panic("kaboom") }}
		_, info, err := ExecuteInfo(context.Background(), g, cmd)
		assert.Equal(t, metrics.Failure, info.Event)
		var pe *isolation.PanicError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "kaboom", pe.Value)
		assert.Contains(t, string(pe.Stack), "TestExecutePanicIsFailureWithStack", "the stack shows where Run panicked")
		assert.Equal(t, int64(1), g.breaker.Snapshot().Health.Failures)
	})
}

func TestExecuteFallbackPanicIsFallbackFailure(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore})
	cmd := opFB[int]{op[int]{"get", fail[int](errBoom)}, func(context.Context, error) (int, error) { panic("fallback bug") }}
	_, info, err := ExecuteInfo(context.Background(), g, cmd)
	var pe *isolation.PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "fallback bug", pe.Value)
	assert.ErrorIs(t, err, errBoom)
	assert.True(t, info.Events.Has(metrics.FallbackFailure))
	// The fallback limiter's permit was given back.
	assert.Zero(t, g.fallback.Stats().Active)
}

func TestExecuteTimeoutPoolDetaches(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Timeout: lateTimeout})
	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release) // a failed test still lets Run return
		}
	}()
	discarded := make(chan int, 1)
	cmd := &discarding{run: func(context.Context) (int, error) {
		<-release // ignores its context: a hung dependency
		return 5, nil
	}, discarded: discarded}
	start := time.Now()
	v, info, err := ExecuteInfo(context.Background(), g, cmd)
	elapsed := time.Since(start)
	assert.Zero(t, v)
	assert.Less(t, elapsed, lateTimeout+5*time.Second, "the caller is answered at the deadline, not when Run returns")
	require.Equal(t, metrics.Timeout, info.Event, "Run must start before the deadline: %v", err)
	assert.ErrorIs(t, err, ErrTimeout)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, isolation.ErrDetached)
	assert.Zero(t, info.RunLatency)
	assert.Equal(t, 1, g.pool.Stats().Detached)
	assert.Equal(t, int64(1), commandSnapshot(t, g, "discarding").Detached)
	close(release)
	assert.Equal(t, 5, receive(t, discarded, "discarded late value"), "the late result is handed to Discard")
	assert.Zero(t, commandSnapshot(t, g, "discarding").Detached, "no longer detached once Run returned")
	assert.Equal(t, int64(1), g.breaker.Snapshot().Health.Timeouts)
}

func commandSnapshot(t *testing.T, g *Group, name string) CommandSnapshot {
	t.Helper()
	for _, c := range g.Snapshot().Commands {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no command %q", name)
	return CommandSnapshot{}
}

// Each command's window holds the peak of its own calls in flight at once;
// the group's the peak of all its calls running.
func TestCommandMaxConcurrency(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		g, _ := newTestGroup(t, GroupConfig{Strategy: s, MaxConcurrent: 8, Timeout: NoTimeout})
		release := make(chan struct{})
		var in sync.WaitGroup
		block := func(ctx context.Context) (int, error) {
			in.Done()
			<-release
			return 1, nil
		}
		var wg sync.WaitGroup
		for i, name := range []string{"a", "a", "a", "a", "a", "b", "b"} {
			in.Add(1)
			wg.Go(func() {
				_, err := Execute(context.Background(), g, op[int]{name: name, run: block})
				assert.NoError(t, err, "call %d", i)
			})
		}
		in.Wait()
		close(release)
		wg.Wait()
		assert.Equal(t, int64(5), commandSnapshot(t, g, "a").Metrics.Max)
		assert.Equal(t, int64(2), commandSnapshot(t, g, "b").Metrics.Max)
		assert.Equal(t, int64(7), g.Snapshot().Metrics.Max)
		assert.Zero(t, commandSnapshot(t, g, "a").InFlight)
	})
}

type discarding struct {
	run       func(context.Context) (int, error)
	discarded chan int
}

func (d *discarding) Run(ctx context.Context) (int, error) { return d.run(ctx) }
func (d *discarding) Discard(v int)                        { d.discarded <- v }

func TestExecuteTimeoutSemaphoreLateRun(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, Timeout: lateTimeout})
	started := make(chan struct{}, 1)
	discarded := make(chan int, 1)
	cmd := &discarding{run: func(ctx context.Context) (int, error) {
		started <- struct{}{}
		<-ctx.Done()
		return 9, nil // a success, but after the deadline
	}, discarded: discarded}
	_, info, err := ExecuteInfo(context.Background(), g, cmd)
	require.Equal(t, metrics.Timeout, info.Event, "Run must start before the deadline: %v", err)
	receive(t, started, "start of Run")
	assert.ErrorIs(t, err, ErrTimeout)
	assert.Equal(t, 9, receive(t, discarded, "discarded late value"))
	assert.Equal(t, "discarding", info.Command, "default name: the type name without pointer")
}

func TestExecuteCancelledIsNotCounted(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		g, _ := newTestGroup(t, GroupConfig{Strategy: s})
		ctx, cancel := context.WithCancel(context.Background())
		fallbacks := 0
		cmd := opFB[int]{op[int]{"get", func(ctx context.Context) (int, error) {
			cancel()
			return waitDone[int](ctx)
		}}, func(context.Context, error) (int, error) { fallbacks++; return 1, nil }}
		_, info, err := ExecuteInfo(ctx, g, cmd)
		assert.Equal(t, metrics.Cancelled, info.Event)
		assert.Equal(t, events(metrics.Cancelled, metrics.ExceptionThrown), info.Events)
		assert.ErrorIs(t, err, context.Canceled)
		assert.NotErrorIs(t, err, ErrTimeout)
		assert.Zero(t, fallbacks)
		assert.Zero(t, g.breaker.Snapshot().Health.Requests)
		assert.Zero(t, g.commands.Load().names.get("get").breaker.Snapshot().Health.Requests)
	})
}

// A caller whose context has already ended is CANCELLED without running
// Run: the bulkhead drops the call.
func TestExecuteEndedContextNeverRuns(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		g, _ := newTestGroup(t, GroupConfig{Strategy: s})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		ran := false
		_, info, err := ExecuteInfo(ctx, g, op[int]{"get", func(context.Context) (int, error) {
			ran = true
			return 1, nil
		}})
		assert.False(t, ran)
		assert.Equal(t, metrics.Cancelled, info.Event)
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, isolation.ErrDropped)
		// A pool worker may still be on its way to the dropped job.
		require.Eventually(t, func() bool { return g.Snapshot().Bulkhead.Active == 0 }, 5*time.Second, time.Millisecond)
	})
}

func TestExecuteCallerDeadlineIsCancelled(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, Timeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	_, info, err := ExecuteInfo(ctx, g, op[int]{"get", waitDone[int]})
	assert.Equal(t, metrics.Cancelled, info.Event, "the caller's own deadline ended the call, not the group's timeout")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, ErrTimeout)
}

func TestExecuteBadRequest(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		errInvalid := errors.New("invalid id")
		errNotFound := errors.New("not found")
		g, _ := newTestGroup(t, GroupConfig{Strategy: s, IsBadRequest: func(err error) bool { return errors.Is(err, errNotFound) }})
		fallbacks := 0
		fb := func(context.Context, error) (int, error) { fallbacks++; return 0, nil }
		marked := BadRequest(errInvalid)

		v, info, err := ExecuteInfo(context.Background(), g, opFB[int]{op[int]{"get", func(context.Context) (int, error) { return 3, marked }}, fb})
		assert.Same(t, marked, err, "returned as is")
		assert.ErrorIs(t, err, errInvalid)
		assert.True(t, IsBadRequest(err))
		assert.Equal(t, 3, v, "with Run's value")
		assert.Equal(t, events(metrics.BadRequest, metrics.ExceptionThrown), info.Events)

		_, info, err = ExecuteInfo(context.Background(), g, opFB[int]{op[int]{"get", fail[int](errNotFound)}, fb})
		assert.Same(t, errNotFound, err)
		assert.Equal(t, metrics.BadRequest, info.Event)

		assert.Zero(t, fallbacks)
		assert.Zero(t, g.breaker.Snapshot().Health.Requests)
		assert.Equal(t, int64(2), counts(t, g, "get")[metrics.BadRequest])
	})
}

func TestExecuteRejected(t *testing.T) {
	for _, tc := range []struct {
		s     Strategy
		event metrics.Event
	}{{Thread, metrics.ThreadPoolRejected}, {Semaphore, metrics.SemaphoreRejected}} {
		t.Run(tc.s.String(), func(t *testing.T) {
			g, _ := newTestGroup(t, GroupConfig{Strategy: tc.s, MaxConcurrent: 1})
			entered, release := make(chan struct{}), make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				_, _ = Execute(context.Background(), g, op[int]{"hold", func(context.Context) (int, error) {
					close(entered)
					<-release
					return 1, nil
				}})
			})
			<-entered
			fallbacks := 0
			cmd := opFB[int]{op[int]{"get", succeed(1)}, func(_ context.Context, err error) (int, error) {
				fallbacks++
				return 0, err
			}}
			_, info, err := ExecuteInfo(context.Background(), g, cmd)
			close(release)
			wg.Wait()
			assert.Equal(t, tc.event, info.Event)
			assert.ErrorIs(t, err, ErrRefused)
			assert.ErrorIs(t, err, isolation.ErrRejected)
			assert.Equal(t, 1, fallbacks)
			assert.Equal(t, events(tc.event, metrics.FallbackFailure, metrics.ExceptionThrown), info.Events)
			assert.Equal(t, int64(1), g.breaker.Snapshot().Health.Requests, "a rejection is not counted")
		})
	}
}

func TestExecuteShortCircuited(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, Breaker: circuit.Config{Mode: circuit.ForcedOpen}})
	runs := 0
	_, info, err := ExecuteInfo(context.Background(), g, op[int]{"get", func(context.Context) (int, error) { runs++; return 1, nil }})
	assert.Zero(t, runs)
	assert.Equal(t, events(metrics.ShortCircuited, metrics.FallbackMissing, metrics.ExceptionThrown), info.Events)
	assert.ErrorIs(t, err, ErrRefused)
	assert.ErrorIs(t, err, circuit.ErrOpen)
	assert.ErrorIs(t, err, breaker.ErrForcedOpen)
	assert.Zero(t, info.Latency, "a short-circuit reads the clock once")
}

func TestExecuteInvalidTimeoutOption(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore})
	runs := 0
	_, info, err := ExecuteInfo(context.Background(), g, op[int]{"get", func(context.Context) (int, error) { runs++; return 1, nil }},
		WithTimeout(-5*time.Second))
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.Equal(t, metrics.BadRequest, info.Event)
	assert.Zero(t, runs)
}

func TestExecuteSlow(t *testing.T) {
	g, clock := newTestGroup(t, GroupConfig{Strategy: Semaphore,
		CommandBreaker: circuit.Config{SlowCallDuration: 100 * time.Millisecond, SlowCallRatio: 1}})
	slow := func(d time.Duration) op[int] {
		return op[int]{"get", func(context.Context) (int, error) { clock.Advance(d); return 1, nil }}
	}
	_, info, err := ExecuteInfo(context.Background(), g, slow(100*time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, events(metrics.Success), info.Events, "at the threshold: not slow")
	assert.Equal(t, 100*time.Millisecond, info.RunLatency)
	_, info, err = ExecuteInfo(context.Background(), g, slow(101*time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, events(metrics.Success, metrics.Slow), info.Events)
	assert.Equal(t, 101*time.Millisecond, info.Latency)
}

func TestExecuteOptionsOverride(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, Timeout: NoTimeout})
	var deadline bool
	cmd := op[int]{"get", func(ctx context.Context) (int, error) { _, deadline = ctx.Deadline(); return 1, nil }}
	_, info, err := ExecuteInfo(context.Background(), g, cmd)
	require.NoError(t, err)
	assert.False(t, deadline, "NoTimeout: no deadline")
	_, info, err = ExecuteInfo(context.Background(), g, cmd, WithTimeout(time.Minute), WithName("other"))
	require.NoError(t, err)
	assert.True(t, deadline)
	assert.Equal(t, "other", info.Command)
}

// TestFallbackCalledExactly checks that the fallback runs exactly on
// FAILURE, TIMEOUT, a rejection and a short-circuit, and that a value is
// marked degraded exactly when a fallback served it.
func TestFallbackCalledExactly(t *testing.T) {
	hold := func(g *Group) func() {
		entered, release := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			_, _ = Execute(context.Background(), g, op[int]{"hold", func(context.Context) (int, error) {
				close(entered)
				<-release
				return 0, nil
			}}, WithTimeout(NoTimeout))
		})
		<-entered
		return func() { close(release); wg.Wait() }
	}
	for _, tc := range []struct {
		name     string
		cfg      GroupConfig
		run      func(context.Context) (int, error)
		setup    func(g *Group) func()
		event    metrics.Event
		fallback bool
	}{
		{name: "success", run: succeed(1), event: metrics.Success},
		{name: "bad request", run: fail[int](BadRequest(errBoom)), event: metrics.BadRequest},
		{name: "failure", run: fail[int](errBoom), event: metrics.Failure, fallback: true},
		{name: "panic", run: func(context.Context) (int, error) { panic(errBoom) }, event: metrics.Failure, fallback: true},
		{name: "timeout", cfg: GroupConfig{Timeout: lateTimeout}, run: waitDone[int], event: metrics.Timeout, fallback: true},
		{name: "rejected", cfg: GroupConfig{MaxConcurrent: 1}, run: succeed(1), setup: hold, event: metrics.ThreadPoolRejected, fallback: true},
		{name: "short-circuited", cfg: GroupConfig{CommandBreaker: circuit.Config{Mode: circuit.ForcedOpen}}, run: succeed(1),
			event: metrics.ShortCircuited, fallback: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := newTestGroup(t, tc.cfg)
			if tc.setup != nil {
				defer tc.setup(g)()
			}
			calls := 0
			v, info, err := ExecuteInfo(context.Background(), g, opFB[int]{op[int]{"get", tc.run}, func(context.Context, error) (int, error) {
				calls++
				return -1, nil
			}})
			assert.Equal(t, tc.event, info.Event)
			if tc.fallback {
				assert.Equal(t, 1, calls)
				assert.NoError(t, err)
				assert.Equal(t, -1, v)
				assert.True(t, info.Degraded)
				assert.True(t, info.Events.Has(metrics.FallbackSuccess))
			} else {
				assert.Zero(t, calls)
				assert.False(t, info.Degraded)
				assert.False(t, info.Events.Has(metrics.FallbackSuccess))
			}
		})
	}
}

func TestFallbackLimitHoldsUnderConcurrency(t *testing.T) {
	const limit, callers = 3, 24
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, MaxConcurrent: callers, FallbackLimit: limit})
	var running, peak atomic.Int32
	gate := make(chan struct{})
	cmd := opFB[int]{op[int]{"get", fail[int](errBoom)}, func(context.Context, error) (int, error) {
		n := running.Add(1)
		for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
		}
		<-gate
		running.Add(-1)
		return 1, nil
	}}
	var served, rejected atomic.Int32
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			_, info, err := ExecuteInfo(context.Background(), g, cmd)
			switch {
			case err == nil && info.Degraded:
				served.Add(1)
			case errors.Is(err, ErrFallbackRejected) && info.Events.Has(metrics.FallbackRejection):
				rejected.Add(1)
			default:
				t.Errorf("unexpected outcome %v, %v", info.Events, err)
			}
		})
	}
	require.Eventually(t, func() bool { return int(running.Load()) == limit && int(rejected.Load()) == callers-limit },
		10*time.Second, time.Millisecond)
	close(gate)
	wg.Wait()
	assert.Equal(t, int32(limit), peak.Load())
	assert.Equal(t, int32(limit), served.Load())
	assert.Equal(t, int32(callers-limit), rejected.Load())
}

// The breakers get Execute's clock readings when they share the group's
// clock, and read their own when their config sets one: each trip is stamped
// on its own breaker's clock.
func TestBreakersUseTheirOwnClock(t *testing.T) {
	reg, clock := newTestRegistry(t)
	clock.Set(time.Minute)
	own := new(metrics.ManualClock)
	own.Set(time.Hour)
	trips := map[string]time.Duration{}
	var mu sync.Mutex
	onTrip := func(tr circuit.Transition) {
		mu.Lock()
		defer mu.Unlock()
		trips[tr.Name] = tr.At
	}
	g, err := reg.NewGroup("deps", GroupConfig{Strategy: Semaphore,
		Breaker:        circuit.Config{MinRequests: 2, OnTransition: onTrip},
		CommandBreaker: circuit.Config{MinRequests: 2, OnTransition: onTrip, Clock: own}})
	require.NoError(t, err)
	for range 2 {
		_, err := Execute(context.Background(), g, op[int]{name: "get", run: fail[int](errBoom)})
		require.ErrorIs(t, err, errBoom)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]time.Duration{"deps": time.Minute, "deps/get": time.Hour}, trips)
}

func TestNoFallbackMarker(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore})
	_, info, err := ExecuteInfo(context.Background(), g, charge{})
	assert.ErrorIs(t, err, ErrFallbackMissing)
	assert.ErrorIs(t, err, errBoom)
	assert.False(t, info.Degraded)
	assert.Equal(t, events(metrics.Failure, metrics.FallbackMissing, metrics.ExceptionThrown), info.Events)
}

// charge must fail loudly: NoFallback overrides the Fallback promoted from
// fallback.Static.
type charge struct {
	NoFallback
	fallback.Static[int]
}

func (charge) Run(context.Context) (int, error) { return 0, errBoom }

// TestTwoLevelBreakers: a failing command opens its own breaker while a
// sibling keeps working; a group-wide failure opens the group's breaker for
// every command.
func TestTwoLevelBreakers(t *testing.T) {
	br := circuit.Config{MinRequests: 4, FailureRatio: 0.5, OpenDuration: time.Minute}
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, CommandBreaker: br,
		Breaker: circuit.Config{MinRequests: 20, FailureRatio: 0.5, OpenDuration: time.Minute}})
	bad := op[int]{"bad", fail[int](errBoom)}
	good := op[int]{"good", succeed(1)}
	for range 4 {
		_, _ = Execute(context.Background(), g, bad)
	}
	_, info, _ := ExecuteInfo(context.Background(), g, bad)
	assert.Equal(t, metrics.ShortCircuited, info.Event, "the failing command's breaker opened")
	for range 12 {
		_, info, err := ExecuteInfo(context.Background(), g, good)
		require.NoError(t, err)
		require.Equal(t, metrics.Success, info.Event, "the sibling keeps working")
	}
	assert.Equal(t, circuit.Closed, g.breaker.State())
	badBreaker, _ := g.CommandBreaker("bad")
	assert.Equal(t, circuit.Open, badBreaker.State())

	// Now the whole dependency fails: many commands, each below its own
	// MinRequests, together trip the group breaker.
	for i := range 20 {
		_, _ = Execute(context.Background(), g, op[int]{string(rune('a' + i)), fail[int](errBoom)})
	}
	assert.Equal(t, circuit.Open, g.breaker.State())
	_, info, err := ExecuteInfo(context.Background(), g, good)
	assert.Equal(t, metrics.ShortCircuited, info.Event, "the group breaker refuses every command")
	assert.ErrorIs(t, err, ErrRefused)
	goodBreaker, _ := g.CommandBreaker("good")
	assert.Equal(t, circuit.Closed, goodBreaker.State())
}

// TestCommandRefusalReleasesGroupPermit: when the group admits a call and
// the command refuses it, the group's permit is released uncounted, so a
// half-open group breaker's probe slot is not lost.
func TestCommandRefusalReleasesGroupPermit(t *testing.T) {
	g, clock := newTestGroup(t, GroupConfig{Strategy: Semaphore,
		Breaker: circuit.Config{MinRequests: 1, OpenDuration: time.Second, HalfOpenProbes: 1, HalfOpenSuccesses: 1}})
	_, _ = Execute(context.Background(), g, op[int]{"get", fail[int](errBoom)})
	require.Equal(t, circuit.Open, g.breaker.State())
	clock.Advance(time.Second)

	blocked, _ := g.CommandBreaker("get")
	blocked.SetMode(circuit.ForcedOpen)
	_, info, err := ExecuteInfo(context.Background(), g, op[int]{"get", succeed(1)})
	assert.Equal(t, metrics.ShortCircuited, info.Event)
	assert.ErrorIs(t, err, breaker.ErrForcedOpen, "refused by the command's breaker")
	assert.Equal(t, 0, g.breaker.Snapshot().Probes, "the group's probe slot was released")

	_, info, err = ExecuteInfo(context.Background(), g, op[int]{"other", succeed(1)})
	require.NoError(t, err)
	assert.Equal(t, metrics.Success, info.Event, "another command gets the probe slot")
	assert.Equal(t, circuit.Closed, g.breaker.State())
}

func TestShortCircuitRetryAfter(t *testing.T) {
	g, clock := newTestGroup(t, GroupConfig{Strategy: Semaphore,
		CommandBreaker: circuit.Config{MinRequests: 1, OpenDuration: 5 * time.Second}})
	_, _ = Execute(context.Background(), g, op[int]{"get", fail[int](errBoom)})
	clock.Advance(1500 * time.Millisecond)
	_, err := Execute(context.Background(), g, op[int]{"get", succeed(1)})
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, metrics.ShortCircuited, e.Event)
	assert.Equal(t, 3500*time.Millisecond, e.RetryAfter())
}

// TestErrorsIsMatrix: the error of every outcome, from a real call,
// matches its own sentinels and no other's.
func TestErrorsIsMatrix(t *testing.T) {
	sentinels := []error{ErrRefused, ErrTimeout, ErrClosed, ErrFallbackRejected, ErrFallbackMissing,
		circuit.ErrOpen, context.DeadlineExceeded, context.Canceled, isolation.ErrRejected, errBoom}
	hold := func(g *Group) func() {
		entered, release := make(chan struct{}), make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = Execute(context.Background(), g, op[int]{"hold", func(context.Context) (int, error) {
				close(entered)
				<-release
				return 0, nil
			}})
		}()
		<-entered
		return func() { close(release); <-done }
	}
	for _, tc := range []struct {
		name  string
		cfg   GroupConfig
		setup func(*Group) func()
		cmd   func(cancel context.CancelFunc) Runner[int]
		want  []error
	}{
		{name: "failure", cmd: func(context.CancelFunc) Runner[int] { return op[int]{"get", fail[int](errBoom)} },
			want: []error{errBoom, ErrFallbackMissing}},
		{name: "timeout", cfg: GroupConfig{Timeout: lateTimeout},
			cmd:  func(context.CancelFunc) Runner[int] { return op[int]{"get", waitDone[int]} },
			want: []error{ErrTimeout, context.DeadlineExceeded, ErrFallbackMissing}},
		{name: "short-circuited", cfg: GroupConfig{Breaker: circuit.Config{Mode: circuit.ForcedOpen}},
			cmd:  func(context.CancelFunc) Runner[int] { return op[int]{"get", succeed(1)} },
			want: []error{ErrRefused, circuit.ErrOpen, ErrFallbackMissing}},
		{name: "rejected, fallback fails", cfg: GroupConfig{MaxConcurrent: 1}, setup: hold,
			cmd: func(context.CancelFunc) Runner[int] {
				return opFB[int]{op[int]{"get", succeed(1)}, func(context.Context, error) (int, error) { return 0, errBoom }}
			},
			want: []error{ErrRefused, isolation.ErrRejected, errBoom}},
		{name: "cancelled", cmd: func(cancel context.CancelFunc) Runner[int] {
			return op[int]{"get", func(ctx context.Context) (int, error) { cancel(); return waitDone[int](ctx) }}
		}, want: []error{context.Canceled}},
	} {
		for _, s := range []Strategy{Thread, Semaphore} {
			t.Run(tc.name+"/"+s.String(), func(t *testing.T) {
				cfg := tc.cfg
				cfg.Strategy = s
				g, _ := newTestGroup(t, cfg)
				if tc.setup != nil {
					defer tc.setup(g)()
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				_, err := Execute(ctx, g, tc.cmd(cancel))
				var e *Error
				require.ErrorAs(t, err, &e)
				for _, s := range sentinels {
					assert.Equal(t, errorIn(s, tc.want), errors.Is(err, s), "errors.Is(%v): %v", s, err)
				}
			})
		}
	}
}

func errorIn(err error, errs []error) bool {
	for _, e := range errs {
		if e == err {
			return true
		}
	}
	return false
}

// TestPoolCallReuseAcrossTypes: commands of different result types sharing
// a name (and so a free list of pool calls) each get their own results.
func TestPoolCallReuseAcrossTypes(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Timeout: NoTimeout})
	ctx := context.Background()
	for i := range 200 {
		n, err := Execute(ctx, g, op[int]{"same", succeed(i)})
		require.NoError(t, err)
		require.Equal(t, i, n)
		s, err := Execute(ctx, g, op[string]{"same", succeed("v")}, WithName("same"))
		require.NoError(t, err)
		require.Equal(t, "v", s)
		_, err = Execute(ctx, g, op[int]{"same", fail[int](errBoom)})
		require.ErrorIs(t, err, errBoom)
	}
}
