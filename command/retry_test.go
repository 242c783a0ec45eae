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
	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/metrics"
)

// retryOp is a test command that may declare itself idempotent; fb nil
// declines to fall back.
type retryOp struct {
	name string
	idem bool
	run  func(ctx context.Context) (int, error)
	fb   func(ctx context.Context, err error) (int, error)
}

func (o retryOp) Name() string                         { return o.name }
func (o retryOp) Idempotent() bool                     { return o.idem }
func (o retryOp) Run(ctx context.Context) (int, error) { return o.run(ctx) }
func (o retryOp) Fallback(ctx context.Context, err error) (int, error) {
	if o.fb == nil {
		return 0, ErrFallbackMissing
	}
	return o.fb(ctx, err)
}

// sleeper is a retry.Config.Sleep that records each delay and moves the
// manual clock by it, without sleeping.
type sleeper struct {
	clock *metrics.ManualClock
	mu    sync.Mutex
	slept []time.Duration
}

func (s *sleeper) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.slept = append(s.slept, d)
	s.mu.Unlock()
	s.clock.Advance(d)
	return ctx.Err()
}

// retryGroup returns a group of strategy s with rc as its Retry, sleeping
// on a sleeper; edit, if not nil, adjusts the config first.
func retryGroup(t *testing.T, s Strategy, rc retry.Config, edit func(*GroupConfig)) (*Group, *metrics.ManualClock, *sleeper) {
	t.Helper()
	reg, clock := newTestRegistry(t)
	sl := &sleeper{clock: clock}
	if rc.Sleep == nil {
		rc.Sleep = sl.sleep
	}
	cfg := GroupConfig{Strategy: s, Retry: rc}
	if edit != nil {
		edit(&cfg)
	}
	g, err := reg.NewGroup("deps", cfg)
	require.NoError(t, err)
	return g, clock, sl
}

// failing returns a Run that fails its first n calls with err, then
// succeeds with 1, counting its calls in runs.
func failing(n int64, err error, runs *atomic.Int64) func(context.Context) (int, error) {
	return func(context.Context) (int, error) {
		if runs.Add(1) <= n {
			return 0, err
		}
		return 1, nil
	}
}

var errDep = errors.New("dependency failed")

// observeOnly sets breakers that never open, so that every attempt reaches
// the dependency.
func observeOnly(c *GroupConfig) {
	c.Breaker.Mode, c.CommandBreaker.Mode = circuit.ObserveOnly, circuit.ObserveOnly
}

func TestRetryMakesAttemptsUntilSuccess(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		g, _, sl := retryGroup(t, s, retry.Config{MaxAttempts: 3, NoBudget: true}, nil)
		var runs atomic.Int64
		v, info, err := ExecuteInfo(context.Background(), g, retryOp{name: "get", idem: true, run: failing(2, errDep, &runs)})
		require.NoError(t, err)
		assert.Equal(t, 1, v)
		assert.Equal(t, 3, info.Attempts)
		assert.Equal(t, metrics.Success, info.Event)
		assert.Equal(t, events(metrics.Success), info.Events, "Events are the last attempt's")
		assert.Len(t, sl.slept, 2)

		c := counts(t, g, "get")
		assert.EqualValues(t, 2, c[metrics.Failure], "each attempt is counted with its own outcome")
		assert.EqualValues(t, 1, c[metrics.Success])
		assert.Zero(t, c[metrics.ExceptionThrown]+c[metrics.FallbackMissing], "a retried attempt has no caller-facing events")
		cb, _ := g.CommandBreaker("get")
		assert.EqualValues(t, 3, cb.Snapshot().Health.Requests, "every attempt reached the command's breaker")
		assert.EqualValues(t, 3, g.Breaker().Snapshot().Health.Requests, "and the group's")
	})
}

func TestRetryGivesUpAfterMaxAttemptsAndFallsBackOnce(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		g, _, _ := retryGroup(t, s, retry.Config{MaxAttempts: 3, NoBudget: true}, nil)
		var runs, fallbacks atomic.Int64
		cmd := retryOp{name: "get", idem: true, run: failing(100, errDep, &runs),
			fb: func(_ context.Context, err error) (int, error) {
				fallbacks.Add(1)
				assert.ErrorIs(t, err, errDep)
				return -1, nil
			}}
		v, info, err := ExecuteInfo(context.Background(), g, cmd)
		require.NoError(t, err)
		assert.Equal(t, -1, v)
		assert.True(t, info.Degraded)
		assert.Equal(t, 3, info.Attempts)
		assert.EqualValues(t, 3, runs.Load())
		assert.EqualValues(t, 1, fallbacks.Load(), "the fallback runs once, after the last attempt")
		assert.Equal(t, events(metrics.Failure, metrics.FallbackSuccess), info.Events)
		c := counts(t, g, "get")
		assert.EqualValues(t, 3, c[metrics.Failure])
		assert.EqualValues(t, 1, c[metrics.FallbackSuccess])
	})
}

func TestRetryOnlyIdempotentCommandsOfARetryingGroup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		retry retry.Config
		idem  bool
		want  int64
	}{
		{"idempotent", retry.Config{MaxAttempts: 3}, true, 3},
		{"declares not idempotent", retry.Config{MaxAttempts: 3}, false, 1},
		{"group without retries", retry.Config{}, true, 1},
		{"MaxAttempts 1", retry.Config{MaxAttempts: 1}, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _, _ := retryGroup(t, Semaphore, tc.retry, nil)
			var runs atomic.Int64
			_, info, err := ExecuteInfo(context.Background(), g, retryOp{name: "get", idem: tc.idem, run: failing(100, errDep, &runs)})
			require.ErrorIs(t, err, errDep)
			assert.Equal(t, tc.want, runs.Load())
			assert.EqualValues(t, tc.want, info.Attempts)
		})
	}
	t.Run("no Idempotent method", func(t *testing.T) {
		g, _, _ := retryGroup(t, Semaphore, retry.Config{MaxAttempts: 3}, nil)
		var runs atomic.Int64
		_, info, err := ExecuteInfo(context.Background(), g, op[int]{"get", failing(100, errDep, &runs)})
		require.ErrorIs(t, err, errDep)
		assert.EqualValues(t, 1, runs.Load())
		assert.Equal(t, 1, info.Attempts)
	})
}

// panickyIdem is a command whose Idempotent method panics.
type panickyIdem struct{ op[int] }

func (panickyIdem) Idempotent() bool { panic("Idempotent panics") }

func TestRetryPanicInIdempotentMeansNoRetry(t *testing.T) {
	g, _, sl := retryGroup(t, Semaphore, retry.Config{MaxAttempts: 3, NoBudget: true}, nil)
	var runs atomic.Int64
	_, info, err := ExecuteInfo(context.Background(), g, panickyIdem{op[int]{"get", failing(100, errDep, &runs)}})
	require.ErrorIs(t, err, errDep, "the call ends with its failure")
	assert.Equal(t, 1, info.Attempts)
	assert.Empty(t, sl.slept)
	c := counts(t, g, "get")
	assert.EqualValues(t, 1, c.Attempts(), "the call is counted")
	assert.EqualValues(t, 1, c[metrics.ExceptionThrown])
	assert.Zero(t, g.commands.Load().names.get("get").hot.inFlight.Load())
}

func TestRetryBackoffIsExponentialWithFullJitter(t *testing.T) {
	rc := retry.Config{MaxAttempts: 5, Backoff: 10 * time.Millisecond, MaxBackoff: 25 * time.Millisecond, NoBudget: true}
	ceilings := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 25 * time.Millisecond, 25 * time.Millisecond}
	for _, f := range []float64{0, 0.5, 0.999} {
		rc.Rand = func() float64 { return f }
		g, _, sl := retryGroup(t, Semaphore, rc, observeOnly)
		var runs atomic.Int64
		_, _, err := ExecuteInfo(context.Background(), g, retryOp{name: "get", idem: true, run: failing(100, errDep, &runs)})
		require.ErrorIs(t, err, errDep)
		require.Len(t, sl.slept, 4)
		for i, c := range ceilings {
			assert.Equal(t, time.Duration(f*float64(c)), sl.slept[i], "retry %d with jitter %v", i+1, f)
		}
	}

	// The default jitter stays within [0, ceiling) and spreads.
	rc.Rand = nil
	g, _, sl := retryGroup(t, Semaphore, rc, observeOnly)
	for range 200 {
		var runs atomic.Int64
		_, _, err := ExecuteInfo(context.Background(), g, retryOp{name: "get", idem: true, run: failing(100, errDep, &runs)})
		require.ErrorIs(t, err, errDep)
	}
	require.Len(t, sl.slept, 800)
	distinct := map[time.Duration]bool{}
	for i, d := range sl.slept {
		assert.GreaterOrEqual(t, d, time.Duration(0))
		assert.Less(t, d, ceilings[i%4])
		distinct[d] = true
	}
	assert.Greater(t, len(distinct), 700, "full jitter spreads the delays")
}

// afterErr is a dependency's error that says when to come back.
type afterErr struct{ d time.Duration }

func (e afterErr) Error() string                  { return "busy, retry after " + e.d.String() }
func (e afterErr) RetryAfterDelay() time.Duration { return e.d }

func TestRetryHonoursRetryAfter(t *testing.T) {
	rc := retry.Config{MaxAttempts: 3, Backoff: 10 * time.Millisecond, MaxRetryAfter: time.Second, NoBudget: true}
	t.Run("within MaxRetryAfter: waits exactly that long", func(t *testing.T) {
		g, _, sl := retryGroup(t, Semaphore, rc, nil)
		var runs atomic.Int64
		v, info, err := ExecuteInfo(context.Background(), g, retryOp{name: "get", idem: true,
			run: failing(1, afterErr{300 * time.Millisecond}, &runs)})
		require.NoError(t, err)
		assert.Equal(t, 1, v)
		assert.Equal(t, 2, info.Attempts)
		assert.Equal(t, []time.Duration{300 * time.Millisecond}, sl.slept)
		assert.Equal(t, 300*time.Millisecond, info.Latency, "Latency covers the wait (manual clock)")
	})
	t.Run("beyond MaxRetryAfter: no retry, the caller is told", func(t *testing.T) {
		g, _, sl := retryGroup(t, Semaphore, rc, nil)
		var runs atomic.Int64
		_, info, err := ExecuteInfo(context.Background(), g, retryOp{name: "get", idem: true,
			run: failing(1, afterErr{2 * time.Second}, &runs)})
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, 1, info.Attempts)
		assert.Empty(t, sl.slept)
		assert.Equal(t, 2*time.Second, e.RetryAfter(), "a FAILURE's RetryAfter is the dependency's")
	})
}

// TestRetryNeverRetriesRefusalsBadRequestsOrCancellations: an attempt that
// did not fail at the dependency is final.
func TestRetryNeverRetriesRefusalsBadRequestsOrCancellations(t *testing.T) {
	rc := retry.Config{MaxAttempts: 3, NoBudget: true}
	for _, tc := range []struct {
		name  string
		s     Strategy
		edit  func(*GroupConfig)
		setup func(t *testing.T, g *Group) (ctx context.Context, run func(context.Context) (int, error))
		want  metrics.Event
	}{
		{name: "short-circuit", s: Semaphore, want: metrics.ShortCircuited,
			setup: func(t *testing.T, g *Group) (context.Context, func(context.Context) (int, error)) {
				g.Breaker().SetMode(circuit.ForcedOpen)
				return context.Background(), nil
			}},
		{name: "semaphore rejection", s: Semaphore, want: metrics.SemaphoreRejected,
			edit:  func(c *GroupConfig) { c.MaxConcurrent = 1 },
			setup: holdBulkhead},
		{name: "thread pool rejection", s: Thread, want: metrics.ThreadPoolRejected,
			edit:  func(c *GroupConfig) { c.MaxConcurrent = 1 },
			setup: holdBulkhead},
		{name: "queue timeout", s: Semaphore, want: metrics.QueueTimeout,
			edit: func(c *GroupConfig) { c.DeadlineReserve = time.Hour },
			setup: func(t *testing.T, g *Group) (context.Context, func(context.Context) (int, error)) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // less than the reserve
				t.Cleanup(cancel)
				return ctx, nil
			}},
		{name: "rate limit", s: Semaphore, want: metrics.RateLimited,
			edit: func(c *GroupConfig) { c.RateLimit = refusing{} },
			setup: func(*testing.T, *Group) (context.Context, func(context.Context) (int, error)) {
				return context.Background(), nil
			}},
		{name: "bad request", s: Semaphore, want: metrics.BadRequest,
			setup: func(*testing.T, *Group) (context.Context, func(context.Context) (int, error)) {
				return context.Background(), func(context.Context) (int, error) { return 0, BadRequest(errDep) }
			}},
		{name: "caller's cancellation", s: Thread, want: metrics.Cancelled,
			setup: func(t *testing.T, g *Group) (context.Context, func(context.Context) (int, error)) {
				ctx, cancel := context.WithCancel(context.Background())
				t.Cleanup(cancel)
				return ctx, func(ctx context.Context) (int, error) {
					cancel()
					<-ctx.Done()
					return 0, ctx.Err()
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _, sl := retryGroup(t, tc.s, rc, tc.edit)
			ctx, run := tc.setup(t, g)
			var runs atomic.Int64
			cmd := retryOp{name: "get", idem: true, run: func(ctx context.Context) (int, error) {
				runs.Add(1)
				if run == nil {
					return 0, errDep
				}
				return run(ctx)
			}}
			_, info, err := ExecuteInfo(ctx, g, cmd)
			require.Error(t, err)
			assert.Equal(t, tc.want, info.Event)
			assert.Equal(t, 1, info.Attempts)
			assert.LessOrEqual(t, runs.Load(), int64(1))
			assert.Empty(t, sl.slept, "no backoff: no retry")
			assert.EqualValues(t, 1, counts(t, g, "get").Attempts(), "one attempt counted")
		})
	}
}

// refusing is a limiter that refuses every call, without a Retry-After.
type refusing struct{}

func (refusing) Admit(context.Context) error { return errors.New("over the limit") }

// holdBulkhead fills a one-slot bulkhead with a call that waits until the
// test ends.
func holdBulkhead(t *testing.T, g *Group) (context.Context, func(context.Context) (int, error)) {
	release, started := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = Execute(context.Background(), g, op[int]{"hold", func(context.Context) (int, error) {
			close(started)
			<-release
			return 1, nil
		}})
	}()
	<-started
	t.Cleanup(func() { close(release); <-done })
	return context.Background(), nil
}

func TestRetryNeverSleepsPastTheCallersDeadline(t *testing.T) {
	rc := retry.Config{MaxAttempts: 3, Backoff: time.Hour, Rand: func() float64 { return 0.5 }, NoBudget: true}
	g, _, sl := retryGroup(t, Semaphore, rc, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var runs atomic.Int64
	_, info, err := ExecuteInfo(ctx, g, retryOp{name: "get", idem: true, run: failing(100, errDep, &runs)})
	require.ErrorIs(t, err, errDep)
	assert.Equal(t, 1, info.Attempts, "a 30 min backoff does not fit in a 1 min deadline")
	assert.Empty(t, sl.slept)
}

func TestRetryEndsWithTheLastAnswerWhenTheCallerLeavesDuringBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rc := retry.Config{MaxAttempts: 3, NoBudget: true, Sleep: func(ctx context.Context, _ time.Duration) error {
		cancel()
		return ctx.Err()
	}}
	g, _, _ := retryGroup(t, Semaphore, rc, nil)
	var runs atomic.Int64
	_, info, err := ExecuteInfo(ctx, g, retryOp{name: "get", idem: true, run: failing(100, errDep, &runs)})
	require.ErrorIs(t, err, errDep, "the caller gets the last attempt's answer")
	assert.Equal(t, metrics.Failure, info.Event)
	assert.Equal(t, 1, info.Attempts)
	assert.EqualValues(t, 1, runs.Load())
	assert.Zero(t, counts(t, g, "get")[metrics.Retried], "a retry not made is not RETRIED")
	assert.Zero(t, g.retries.pending.Load(), "nor pending in the budget")
}

// TestRetryCountsOneRetriedEventPerRetriedAttempt: every attempt that is
// retried carries RETRIED beside its own outcome, in the window and the
// cumulative counts; the last attempt of a call never does.
func TestRetryCountsOneRetriedEventPerRetriedAttempt(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		g, _, _ := retryGroup(t, s, retry.Config{MaxAttempts: 3, NoBudget: true}, observeOnly)
		var runs atomic.Int64
		_, info, err := ExecuteInfo(context.Background(), g, retryOp{name: "get", idem: true, run: failing(2, errDep, &runs)})
		require.NoError(t, err)
		assert.False(t, info.Events.Has(metrics.Retried), "the last attempt is not retried: %v", info.Events)
		c := counts(t, g, "get")
		assert.EqualValues(t, 2, c[metrics.Retried], "two attempts retried")
		assert.EqualValues(t, 2, c[metrics.Failure])
		assert.EqualValues(t, 1, c[metrics.Success])

		runs.Store(0)
		_, info, err = ExecuteInfo(context.Background(), g, retryOp{name: "get", idem: true, run: failing(100, errDep, &runs)})
		require.ErrorIs(t, err, errDep)
		assert.Equal(t, 3, info.Attempts)
		assert.False(t, info.Events.Has(metrics.Retried), "given up: the last attempt is not retried: %v", info.Events)
		c = counts(t, g, "get")
		assert.EqualValues(t, 4, c[metrics.Retried], "two more: the third attempt was the last")
		assert.EqualValues(t, 5, c[metrics.Failure])
		assert.EqualValues(t, c.Attempts()-2, c[metrics.Retried], "attempts − calls == RETRIED")

		_, _, err = ExecuteInfo(context.Background(), g, retryOp{name: "put", run: failing(100, errDep, &runs)})
		require.ErrorIs(t, err, errDep)
		assert.Zero(t, counts(t, g, "put")[metrics.Retried], "a call not retried has no RETRIED")

		cmd := g.commands.Load().names.get("get")
		assert.EqualValues(t, 4, cmd.metrics.Cumulative()[metrics.Retried])
		assert.Zero(t, g.retries.pending.Load(), "no retry left pending in the budget")
	})
}

// TestRetryBudgetCountsRetriesInTheirBackoff: retries the budget admitted
// count against it while they wait, before their attempt is in the window,
// so that calls failing at once share the budget instead of each seeing it
// untouched. 30 calls fail together on an empty window: the budget (1% of
// at most 21 calls, plus 1/s over 10 s) admits exactly 10 retries.
func TestRetryBudgetCountsRetriesInTheirBackoff(t *testing.T) {
	const callers = 30
	var waiting atomic.Int64
	release := make(chan struct{})
	rc := retry.Config{MaxAttempts: 2, BudgetRatio: 0.01, Sleep: func(ctx context.Context, _ time.Duration) error {
		waiting.Add(1)
		<-release
		return nil
	}}
	g, _, _ := retryGroup(t, Semaphore, rc, func(c *GroupConfig) {
		observeOnly(c)
		c.MaxConcurrent = callers
	})
	var runs, returned atomic.Int64
	cmd := retryOp{name: "get", idem: true, run: failing(1<<62, errDep, &runs)}
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := Execute(context.Background(), g, cmd)
			assert.ErrorIs(t, err, errDep)
			returned.Add(1)
		}()
	}
	require.Eventually(t, func() bool { return waiting.Load()+returned.Load() == callers },
		30*time.Second, time.Millisecond, "every call decided")
	assert.EqualValues(t, 10, waiting.Load(), "retries admitted while none was recorded")
	assert.EqualValues(t, 10, g.retries.pending.Load())
	close(release)
	wg.Wait()
	assert.EqualValues(t, callers+10, runs.Load())
	assert.EqualValues(t, 10, counts(t, g, "get")[metrics.Retried])
	assert.Zero(t, g.retries.pending.Load())
}

// TestRetryBudgetCountsRetriesMadeWithoutIt: the budget reads the retries
// from the commands' windows, so the retries made while NoBudget was set
// still count once a Reconfigure restores the budget: the dependency did
// get them.
func TestRetryBudgetCountsRetriesMadeWithoutIt(t *testing.T) {
	zero := func(context.Context, time.Duration) error { return nil }
	g, _, _ := retryGroup(t, Semaphore, retry.Config{MaxAttempts: 2, NoBudget: true, Sleep: zero}, observeOnly)
	var runs atomic.Int64
	cmd := retryOp{name: "get", idem: true, run: failing(1<<62, errDep, &runs)}
	for range 20 {
		_, _ = Execute(context.Background(), g, cmd)
	}
	require.EqualValues(t, 40, runs.Load(), "every call retried")
	cfg := g.Config()
	cfg.Retry.NoBudget = false
	require.NoError(t, g.Reconfigure(cfg))
	// 20 retries over 21 calls: above 20% of them plus 1/s × 10 s (14.2).
	_, info, _ := ExecuteInfo(context.Background(), g, cmd)
	assert.Equal(t, 1, info.Attempts, "the budget is spent")
	assert.EqualValues(t, 41, runs.Load())
}

// TestRetryBudgetCapsTheLoadOnAFailingDependency measures the load
// multiplier (calls reaching the dependency / callers' calls) of a
// dependency that fails every call, 100 calls a second for a minute on the
// manual clock, with 3 attempts: MaxAttempts× without a budget, about
// 1 + BudgetRatio (+ the minimum rate) with the default budget.
func TestRetryBudgetCapsTheLoadOnAFailingDependency(t *testing.T) {
	measure := func(t *testing.T, rc retry.Config) float64 {
		// Breakers that never open, so that every attempt reaches the dependency.
		g, clock, _ := retryGroup(t, Semaphore, rc, observeOnly)
		var runs atomic.Int64
		cmd := retryOp{name: "get", idem: true, run: failing(1<<62, errDep, &runs)}
		const perSecond, seconds = 100, 60
		for range perSecond * seconds {
			_, err := Execute(context.Background(), g, cmd)
			require.ErrorIs(t, err, errDep)
			clock.Advance(time.Second / perSecond)
		}
		m := float64(runs.Load()) / (perSecond * seconds)
		t.Logf("%d caller calls, %d reached the dependency: load multiplier %.3f", perSecond*seconds, runs.Load(), m)
		return m
	}
	zero := func(context.Context, time.Duration) error { return nil }
	off := measure(t, retry.Config{MaxAttempts: 3, NoBudget: true, Sleep: zero})
	on := measure(t, retry.Config{MaxAttempts: 3, Sleep: zero})
	assert.InDelta(t, 3.0, off, 1e-9, "without a budget every call makes 3 attempts")
	// 20% of 1,000 calls per 10 s window, plus 1 retry/s: at most 1.21.
	assert.InDelta(t, 1.2, on, 0.02, "the budget holds retries to about 20%% of calls")
	assert.LessOrEqual(t, on, 1.21)
}

func TestRetryBudgetAllowsTheMinimumRateAtLowTraffic(t *testing.T) {
	zero := func(context.Context, time.Duration) error { return nil }
	g, clock, _ := retryGroup(t, Semaphore, retry.Config{MaxAttempts: 2, BudgetMinPerSecond: 0.5, Sleep: zero}, observeOnly)
	var runs atomic.Int64
	cmd := retryOp{name: "get", idem: true, run: failing(1<<62, errDep, &runs)}
	for range 20 { // 20 calls in 10 s: 20% is 4 retries, plus 0.5/s × 10 s = 9
		_, _ = Execute(context.Background(), g, cmd)
		clock.Advance(500 * time.Millisecond)
	}
	assert.EqualValues(t, 20+9, runs.Load())
}

func TestRetryValidation(t *testing.T) {
	for _, tc := range []struct {
		rc   retry.Config
		want string
	}{
		{retry.Config{MaxAttempts: -1}, "Retry.MaxAttempts -1"},
		{retry.Config{MaxAttempts: maxRetryAttempts + 1}, "Retry.MaxAttempts 11"},
		{retry.Config{MaxAttempts: 2, Backoff: -time.Second}, "Retry.Backoff -1s"},
		{retry.Config{MaxAttempts: 2, Backoff: time.Second, MaxBackoff: time.Millisecond}, "Retry.MaxBackoff 1ms"},
		{retry.Config{MaxAttempts: 2, MaxRetryAfter: -1}, "Retry.MaxRetryAfter -1ns"},
		{retry.Config{MaxAttempts: 2, BudgetRatio: 1.5}, "Retry.BudgetRatio 1.5"},
		{retry.Config{MaxAttempts: 2, BudgetRatio: -0.1}, "Retry.BudgetRatio -0.1"},
		{retry.Config{MaxAttempts: 2, BudgetMinPerSecond: -1}, "Retry.BudgetMinPerSecond -1"},
	} {
		err := GroupConfig{Retry: tc.rc}.Validate()
		require.ErrorIs(t, err, ErrInvalidConfig, tc.want)
		assert.Contains(t, err.Error(), tc.want)
	}
	require.NoError(t, GroupConfig{Retry: retry.Config{MaxAttempts: 3}}.Validate())
}

func TestRetryChangesLive(t *testing.T) {
	g, _, _ := retryGroup(t, Semaphore, retry.Config{}, nil)
	var runs atomic.Int64
	cmd := retryOp{name: "get", idem: true, run: failing(1<<62, errDep, &runs)}
	_, _ = Execute(context.Background(), g, cmd)
	require.EqualValues(t, 1, runs.Load())
	cfg := g.Config()
	cfg.Retry = retry.Config{MaxAttempts: 2, NoBudget: true, Sleep: func(context.Context, time.Duration) error { return nil }}
	require.NoError(t, g.Reconfigure(cfg))
	_, _ = Execute(context.Background(), g, cmd)
	assert.EqualValues(t, 3, runs.Load())
}

// TestConservationWithRetries is the chaos test with retries on (3
// attempts, the default budget, no backoff) for the idempotent half of the
// commands: every attempt is counted once with its own outcome, in the
// windows and the breakers, and every count still agrees exactly with what
// the callers saw.
func TestConservationWithRetries(t *testing.T) {
	// A rate limit in front, as in TestConservationWithRateLimit: every
	// attempt, a retry too, passes it. It refuses every fifth attempt,
	// whatever the time (a token bucket on the system clock refused none on
	// a loaded machine, where the calls came slower than its rate), so that
	// refusals are certain and enough attempts reach the dependency to be
	// retried.
	lim := &countingLimiter{Limiter: &nthLimiter{n: 5}}
	groups := chaosRegistry(t, circuit.Config{Mode: circuit.ForcedClosed}, lim)
	for _, g := range groups {
		require.NoError(t, g.Reconfigure(changed(g, func(c *GroupConfig) {
			c.Retry = retry.Config{MaxAttempts: 3, Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}
		})))
	}
	const calls = chaosCalls / 4
	res := runChaos(t, groups, calls)
	require.False(t, t.Failed())
	waitIdle(t, groups)
	checkDiscards(t, res)

	var callers, attempts, limited int64
	for _, g := range groups {
		now := g.clock.Now()
		for name, c := range g.commands.Load().byName {
			seen := res.tallies[g.name+"/"+name]
			checkCommandCounts(t, g, name, c, seen, now)
			callers += seen.callers
			attempts += seen.calls
			limited += seen.events[metrics.RateLimited]
		}
	}
	assert.Equal(t, int64(calls/chaosGoroutines*chaosGoroutines), callers)
	assert.Equal(t, lim.refused.Load(), limited, "one RATE_LIMITED per refusal")
	assert.Equal(t, attempts, lim.admitted.Load()+lim.refused.Load(), "every attempt passed the limiter")
	assert.Positive(t, limited, "the limiter refused attempts")
	retries := attempts - callers
	t.Logf("%d calls, %d retries (%.1f%%), %d attempts rate limited", callers, retries, 100*float64(retries)/float64(callers), limited)
	assert.Positive(t, retries, "the test reaches retries")
	// The budget: 20% of the calls in the window (the manual clock never
	// moves: all of them), plus 1/s over the 10 s window, plus the
	// overshoot of the 64 goroutines that may decide at once.
	assert.LessOrEqual(t, retries, callers/5+10+chaosGoroutines)
}

// TestRetryCallsCountCallersNotAttempts: Calls and the degraded rate (which the degraded alarm of package alert
// reads) count a retried call once: a call of 3 attempts served by its
// fallback is one call, degraded (rate 1, not 1/3).
func TestRetryCallsCountCallersNotAttempts(t *testing.T) {
	reg, _ := newTestRegistry(t)
	g, err := reg.NewGroup("deps", GroupConfig{Strategy: Semaphore,
		Retry: retry.Config{MaxAttempts: 3, NoBudget: true, Sleep: func(context.Context, time.Duration) error { return nil }}})
	require.NoError(t, err)
	var runs atomic.Int64
	v, info, err := ExecuteInfo(context.Background(), g, retryOp{name: "get", idem: true, run: failing(100, errDep, &runs),
		fb: func(context.Context, error) (int, error) { return -1, nil }})
	require.NoError(t, err)
	require.Equal(t, -1, v)
	require.Equal(t, 3, info.Attempts)

	c := counts(t, g, "get")
	assert.EqualValues(t, 3, c.Attempts(), "three attempts")
	assert.EqualValues(t, 1, c.Calls(), "one call")
	s := g.Snapshot()
	require.Len(t, s.Commands, 1)
	assert.InDelta(t, 1.0, s.Commands[0].Metrics.Counts.DegradedRate(), 1e-9, "the one call was degraded")
}
