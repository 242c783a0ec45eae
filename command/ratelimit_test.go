package command

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/ratelimit"
)

func TestRateLimitedCallFallsBackAndNeverReachesTheBreakers(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		reg, clock := newTestRegistry(t)
		lim, err := ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 2, Burst: 1, Clock: clock})
		require.NoError(t, err)
		// Breakers that would open on a single counted failure.
		tight := circuit.Config{MinRequests: 1, FailureRatio: 0.01}
		g, err := reg.NewGroup("deps", GroupConfig{Strategy: s, RateLimit: lim, Breaker: tight, CommandBreaker: tight})
		require.NoError(t, err)
		ran := 0
		cmd := opFB[int]{op[int]{"get", func(context.Context) (int, error) { ran++; return 1, nil }},
			func(_ context.Context, err error) (int, error) {
				require.ErrorIs(t, err, ErrRefused)
				return -1, nil
			}}

		v, info, err := ExecuteInfo(context.Background(), g, cmd)
		require.NoError(t, err)
		require.Equal(t, 1, v)
		require.Equal(t, metrics.Success, info.Event)

		v, info, err = ExecuteInfo(context.Background(), g, cmd)
		require.NoError(t, err)
		require.Equal(t, -1, v, "the fallback answers a refused call")
		require.True(t, info.Degraded)
		require.Equal(t, metrics.RateLimited, info.Event)
		require.Equal(t, events(metrics.RateLimited, metrics.FallbackSuccess), info.Events)
		require.Equal(t, 1, ran, "Run never started for the refused call")

		c := counts(t, g, "get")
		require.EqualValues(t, 1, c[metrics.RateLimited])
		require.EqualValues(t, 1, c[metrics.Success])
		for _, b := range []*circuit.Breaker{g.Breaker(), g.commands.Load().names.get("get").breaker} {
			snap := b.Snapshot()
			require.EqualValues(t, 1, snap.Health.Requests, "the breaker counts only the call that ran")
			require.Equal(t, circuit.Closed, snap.State)
		}
	})
}

func TestRateLimitedErrorSaysWhenToRetry(t *testing.T) {
	reg, clock := newTestRegistry(t)
	lim, err := ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 4, Burst: 1, Clock: clock})
	require.NoError(t, err)
	g, err := reg.NewGroup("deps", GroupConfig{Strategy: Semaphore, RateLimit: lim})
	require.NoError(t, err)
	cmd := op[int]{"get", succeed(1)}
	_, err = Execute(context.Background(), g, cmd)
	require.NoError(t, err)
	_, info, err := ExecuteInfo(context.Background(), g, cmd)
	require.ErrorIs(t, err, ErrRefused)
	require.ErrorIs(t, err, ratelimit.ErrLimited, "the limiter's error stays reachable")
	require.ErrorIs(t, err, ErrFallbackMissing)
	require.NotErrorIs(t, err, isolation.ErrRejected)
	require.NotErrorIs(t, err, circuit.ErrOpen)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, 250*time.Millisecond, e.RetryAfter())
	require.Equal(t, events(metrics.RateLimited, metrics.FallbackMissing, metrics.ExceptionThrown), info.Events)
	require.Contains(t, err.Error(), "rate_limited")
}

func TestKeyedRateLimitGivesEachKeyItsQuota(t *testing.T) {
	reg, clock := newTestRegistry(t)
	perKey, err := ratelimit.NewPerKey(ratelimit.PerKeyConfig{New: func(string) (ratelimit.Limiter, error) {
		return ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 1, Burst: 2, Clock: clock})
	}})
	require.NoError(t, err)
	g, err := reg.NewGroup("deps", GroupConfig{Strategy: Semaphore, KeyedRateLimit: perKey})
	require.NoError(t, err)
	call := func(opts ...Option) metrics.Event {
		_, info, _ := ExecuteInfo(context.Background(), g, op[int]{"get", succeed(1)}, opts...)
		return info.Event
	}
	for _, key := range []string{"alice", "bob"} {
		require.Equal(t, metrics.Success, call(WithKey(key)))
		require.Equal(t, metrics.Success, call(WithKey(key)))
		require.Equal(t, metrics.RateLimited, call(WithKey(key)), "%s used up their burst", key)
	}
	require.Equal(t, metrics.Success, call(), "calls without a key share the key \"\"")
	require.Equal(t, metrics.Success, call())
	require.Equal(t, metrics.RateLimited, call())
}

func TestCommandRateLimitAppliesToThatCommandOnly(t *testing.T) {
	reg, clock := newTestRegistry(t)
	lim, err := ratelimit.NewSlidingWindow(ratelimit.SlidingWindowConfig{Limit: 1, Clock: clock})
	require.NoError(t, err)
	g, err := reg.NewGroup("deps", GroupConfig{Strategy: Semaphore, Commands: map[string]CommandConfig{"write": {RateLimit: lim}}})
	require.NoError(t, err)
	call := func(name string) metrics.Event {
		_, info, _ := ExecuteInfo(context.Background(), g, op[int]{name, succeed(1)})
		return info.Event
	}
	require.Equal(t, metrics.Success, call("write"))
	require.Equal(t, metrics.RateLimited, call("write"))
	require.Equal(t, metrics.Success, call("read"))
	require.Equal(t, metrics.Success, call("read"))
}

// blockingLimiter waits until ctx ends, as a pacer whose slot is far ahead.
type blockingLimiter struct{}

func (blockingLimiter) Admit(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestCallerLeavingWhileLimiterWaitsIsCancelled(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{RateLimit: blockingLimiter{}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	fbCalled := false
	_, info, err := ExecuteInfo(ctx, g, opFB[int]{op[int]{"get", succeed(1)},
		func(context.Context, error) (int, error) { fbCalled = true; return -1, nil }})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, ErrRefused)
	require.Equal(t, metrics.Cancelled, info.Event)
	require.False(t, fbCalled, "a cancelled call never falls back")
}

// countingLimiter counts the admissions and refusals of the limiter it wraps.
type countingLimiter struct {
	ratelimit.Limiter
	admitted, refused atomic.Int64
}

func (c *countingLimiter) Admit(ctx context.Context) error {
	err := c.Limiter.Admit(ctx)
	if err != nil {
		c.refused.Add(1)
	} else {
		c.admitted.Add(1)
	}
	return err
}

// TestConservationWithRateLimit: the chaos of TestConservationUnderChaos
// behind a token bucket that refuses part of the calls: every count still
// agrees with what the callers saw, every refusal is one RATE_LIMITED, and
// the breakers count none of them.
func TestConservationWithRateLimit(t *testing.T) {
	bucket, err := ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 1000, Burst: 50})
	require.NoError(t, err)
	lim := &countingLimiter{Limiter: bucket}
	groups := chaosRegistry(t, circuit.Config{Mode: circuit.ForcedClosed}, lim)
	const calls = chaosCalls / 4
	total, limited := chaosRefusals(t, groups, calls, metrics.RateLimited)
	assert.Equal(t, lim.refused.Load(), limited, "one RATE_LIMITED per refusal")
	assert.Equal(t, lim.admitted.Load(), total-limited, "every admitted call went on")
	assert.Positive(t, limited, "the limiter refused calls")
	assert.Positive(t, lim.admitted.Load())
	t.Logf("%d of %d calls rate limited", limited, total)
}

// countingClock is a manual clock that counts its readings.
type countingClock struct {
	metrics.ManualClock
	reads atomic.Int64
}

func (c *countingClock) Now() time.Duration {
	c.reads.Add(1)
	return c.ManualClock.Now()
}

// admitFunc is a ratelimit.Limiter of the caller's own.
type admitFunc func(context.Context) error

func (f admitFunc) Admit(ctx context.Context) error { return f(ctx) }

// A call whose limiters all never wait (package ratelimit's TokenBucket,
// SlidingWindow and WarmUp) reads the group's clock twice, as a call
// without limiters does: the limiters add no clock reading of Execute's.
// Any other limiter may wait, and costs one more, the instant it was done.
func TestRateLimitNonWaitingReadsTheClockOnceLess(t *testing.T) {
	admit := admitFunc(func(context.Context) error { return nil })
	other := new(metrics.ManualClock) // the limiters' own: not counted
	bucket, err := ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 1e9, Burst: 1 << 20, Clock: other})
	require.NoError(t, err)
	window, err := ratelimit.NewSlidingWindow(ratelimit.SlidingWindowConfig{Limit: 1 << 20, Clock: other})
	require.NoError(t, err)
	warm, err := ratelimit.NewWarmUp(ratelimit.WarmUpConfig{Rate: 1e9, Burst: 1 << 20, ColdFactor: 1, Period: time.Second, Clock: other})
	require.NoError(t, err)
	pacer, err := ratelimit.NewPacer(ratelimit.PacerConfig{Interval: time.Nanosecond, MaxWait: time.Second, Clock: other})
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		limit ratelimit.Limiter
		reads int64
	}{
		{"none", nil, 2},
		{"token bucket", bucket, 2},
		{"sliding window", window, 2},
		{"warm-up", warm, 2},
		{"pacer: may wait", pacer, 3},
		{"the caller's own: may wait", admit, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := new(countingClock)
			reg := NewRegistry(RegistryConfig{Clock: clock, Logger: discardLogger})
			t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
			g, err := reg.NewGroup("deps", GroupConfig{Strategy: Semaphore, Timeout: NoTimeout, RateLimit: tc.limit})
			require.NoError(t, err)
			cmd := op[int]{"get", func(context.Context) (int, error) { return 1, nil }}
			_, err = Execute(context.Background(), g, cmd) // creates the command
			require.NoError(t, err)
			clock.reads.Store(0)
			_, info, err := ExecuteInfo(context.Background(), g, cmd)
			require.NoError(t, err)
			require.Equal(t, metrics.Success, info.Event)
			require.Equal(t, tc.reads, clock.reads.Load())
		})
	}
}

// A limiter on the group's clock decides at the reading each call takes at
// its start: it reads no clock of its own. One on another clock reads its
// own, once a call.
func TestClockedLimiterGetsTheCallsReadingOnlyOnTheGroupsClock(t *testing.T) {
	group, other := new(countingClock), new(countingClock)
	reg := NewRegistry(RegistryConfig{Clock: group, Logger: discardLogger})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	same, err := ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 1e9, Burst: 1 << 20, Clock: group})
	require.NoError(t, err)
	own, err := ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 1e9, Burst: 1 << 20, Clock: other})
	require.NoError(t, err)
	g, err := reg.NewGroup("deps", GroupConfig{Strategy: Semaphore, Timeout: NoTimeout, RateLimit: same,
		Commands: map[string]CommandConfig{"get": {RateLimit: own}}})
	require.NoError(t, err)
	cmd := op[int]{"get", func(context.Context) (int, error) { return 1, nil }}
	group.reads.Store(0)
	for range 2 {
		_, err = Execute(context.Background(), g, cmd)
		require.NoError(t, err)
	}
	assert.Equal(t, int64(4), group.reads.Load(), "two readings a call, the limiter on the group's clock reads none")
	assert.Equal(t, int64(2), other.reads.Load(), "a limiter on another clock reads its own")
}

// funcClock is a Clock that is not a pointer.
type funcClock func() time.Duration

func (f funcClock) Now() time.Duration { return f() }

func TestSameClock(t *testing.T) {
	manual, other := new(metrics.ManualClock), new(metrics.ManualClock)
	fn := funcClock(func() time.Duration { return 0 })
	for _, tc := range []struct {
		name string
		a, b metrics.Clock
		want bool
	}{
		{"SystemClock is one clock", metrics.SystemClock(), metrics.SystemClock(), true},
		{"a ManualClock is itself", manual, manual, true},
		{"two ManualClocks differ", manual, other, false},
		{"system and manual differ", metrics.SystemClock(), manual, false},
		{"nil is no clock", nil, nil, false},
		{"a clock that is not a pointer is never the same", fn, fn, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, sameClock(tc.a, tc.b))
		})
	}
}
