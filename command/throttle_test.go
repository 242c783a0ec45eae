package command

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/command/throttle"
	"github.com/bulwark-go/bulwark/metrics"
)

func TestThrottleValidate(t *testing.T) {
	for _, k := range []float64{-1, 0.5, math.NaN(), math.Inf(1)} {
		err := GroupConfig{Throttle: throttle.Config{K: k}}.Validate()
		require.ErrorIs(t, err, ErrInvalidConfig)
		assert.ErrorContains(t, err, "Throttle.K")
		assert.ErrorContains(t, err, "must be 0 (off) or at least 1")
	}
	err := GroupConfig{Throttle: throttle.Config{Rand: func() float64 { return 0 }}}.Validate()
	assert.ErrorContains(t, err, "Throttle.Rand is set but Throttle.K is 0")
	assert.NoError(t, GroupConfig{Throttle: throttle.Config{K: 1}}.Validate())
	assert.NoError(t, GroupConfig{Throttle: throttle.Config{K: 2}}.Validate())
}

// always is a Rand whose draws are all x.
func always(x float64) func() float64 { return func() float64 { return x } }

// overloaded returns a command named name that fails (with a fallback
// serving -1 when fb), and counts its runs in ran.
func overloaded(name string, ran *int) opFB[int] {
	return opFB[int]{op[int]{name, func(context.Context) (int, error) { *ran++; return 0, errors.New("overloaded") }},
		func(context.Context, error) (int, error) { return -1, nil }}
}

func TestThrottleNeverRefusesAHealthyDependency(t *testing.T) {
	reg, _ := newTestRegistry(t)
	g, err := reg.NewGroup("deps", GroupConfig{Strategy: Semaphore, Throttle: throttle.Config{K: 1, Rand: always(0)}})
	require.NoError(t, err)
	ok := op[int]{"get", func(context.Context) (int, error) { return 1, nil }}
	bad := op[int]{"get", func(context.Context) (int, error) { return 0, BadRequest(errors.New("no such user")) }}
	for i := range 1000 {
		cmd := ok
		if i%3 == 0 {
			cmd = bad // the dependency answered: an accept
		}
		_, info, _ := ExecuteInfo(context.Background(), g, cmd)
		require.NotEqual(t, metrics.Throttled, info.Event, "call %d", i)
	}
	s := g.Snapshot().Throttle
	assert.Equal(t, throttle.Status{K: 1, Requests: 1000, Accepts: 1000}, s, "even a draw of 0 admits at probability 0")
}

func TestThrottledCallFallsBackAndNeverReachesTheBreakers(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		reg, _ := newTestRegistry(t)
		forced := circuit.Config{Mode: circuit.ForcedClosed} // counts every outcome, never opens
		g, err := reg.NewGroup("deps", GroupConfig{Strategy: s, Breaker: forced, CommandBreaker: forced,
			Retry:    retry.Config{MaxAttempts: 3, NoBudget: true, Sleep: func(context.Context, time.Duration) error { return nil }},
			Throttle: throttle.Config{K: 2, Rand: always(0.5)}})
		require.NoError(t, err)
		ran := 0
		cmd := idempotentFB{overloaded("get", &ran)}
		// Before call i (every earlier attempt failed, none throttled yet)
		// the probability is i/(i+1): the draw of 0.5 admits i = 0 and 1
		// (p 0, 0.5), and throttles from i = 2 on.
		_, info, err := ExecuteInfo(context.Background(), g, cmd)
		require.NoError(t, err)
		require.Equal(t, metrics.Throttled, info.Event, "attempts 1 and 2 failed, the third was throttled")
		require.Equal(t, 3, info.Attempts)
		require.True(t, info.Degraded)
		require.Equal(t, events(metrics.Throttled, metrics.FallbackSuccess), info.Events)
		require.Equal(t, 2, ran)

		_, info, err = ExecuteInfo(context.Background(), g, cmd)
		require.NoError(t, err)
		require.Equal(t, 1, info.Attempts, "a THROTTLED attempt is never retried")
		require.Equal(t, metrics.Throttled, info.Event)

		_, err = Execute(context.Background(), g, op[int]{"put", func(context.Context) (int, error) { ran++; return 0, nil }})
		require.ErrorIs(t, err, ErrRefused)
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, "command deps/put: throttled: client-side throttle: the dependency accepts too few of the group's requests (fallback: command: no fallback)", e.Error())
		require.Equal(t, 2, ran)

		for _, b := range []*circuit.Breaker{g.Breaker(), g.commands.Load().names.get("get").breaker} {
			require.EqualValues(t, 2, b.Snapshot().Health.Requests, "the breakers count only the attempts that ran")
		}
		assert.Equal(t, throttle.Status{K: 2, Requests: 5, Accepts: 0, Probability: 5.0 / 6}, g.Snapshot().Throttle)
	})
}

// idempotentFB is a failing command with a fallback that may be retried.
type idempotentFB struct{ opFB[int] }

func (idempotentFB) Idempotent() bool { return true }

func TestThrottleProbabilityAndWhatItCounts(t *testing.T) {
	reg, clock := newTestRegistry(t)
	forced := circuit.Config{Mode: circuit.ForcedClosed}
	g, err := reg.NewGroup("deps", GroupConfig{Strategy: Semaphore, MaxConcurrent: 1, Timeout: NoTimeout,
		Breaker: forced, CommandBreaker: forced, Throttle: throttle.Config{K: 2, Rand: always(0.99)}})
	require.NoError(t, err)
	ok := op[int]{"get", func(context.Context) (int, error) { return 1, nil }}
	ran := 0
	for range 10 {
		_, _ = Execute(context.Background(), g, ok)
	}
	for range 30 {
		_, _ = Execute(context.Background(), g, overloaded("get", &ran))
	}
	// Neither a cancelled call nor a short-circuited one is a request.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, info, _ := ExecuteInfo(ctx, g, op[int]{"get", func(ctx context.Context) (int, error) { return 0, ctx.Err() }})
	require.Equal(t, metrics.Cancelled, info.Event)
	g.Breaker().SetMode(circuit.ForcedOpen)
	_, info, _ = ExecuteInfo(context.Background(), g, ok)
	require.Equal(t, metrics.ShortCircuited, info.Event)
	g.Breaker().SetMode(circuit.ForcedClosed)

	s := g.Snapshot().Throttle
	assert.Equal(t, int64(40), s.Requests)
	assert.Equal(t, int64(10), s.Accepts)
	assert.InDelta(t, (40-2*10)/41.0, s.Probability, 1e-12)

	// The counts leave with the window.
	clock.Advance(g.Config().Window.Length)
	assert.Equal(t, throttle.Status{K: 2}, g.Snapshot().Throttle)
}

func TestReconfigureThrottle(t *testing.T) {
	reg, _ := newTestRegistry(t)
	g, err := reg.NewGroup("deps", GroupConfig{Strategy: Semaphore})
	require.NoError(t, err)
	ran := 0
	_, _ = Execute(context.Background(), g, overloaded("get", &ran))
	assert.Equal(t, throttle.Status{}, g.Snapshot().Throttle, "off")

	cfg := g.Config()
	cfg.Throttle = throttle.Config{K: 2, Rand: always(0.999)}
	require.NoError(t, g.Reconfigure(cfg))
	for range 3 {
		_, _ = Execute(context.Background(), g, overloaded("get", &ran))
	}
	assert.EqualValues(t, 4, g.Snapshot().Throttle.Requests, "the window's calls, from before it was on too")

	cfg.Throttle.K = 1
	require.NoError(t, g.Reconfigure(cfg))
	assert.Equal(t, throttle.Status{K: 1, Requests: 4, Probability: 0.8}, g.Snapshot().Throttle, "the counts stay")

	cfg.Throttle.K = 0.5
	require.ErrorContains(t, g.Reconfigure(cfg), "Throttle.K 0.5 must be 0 (off) or at least 1")
	cfg.Throttle = throttle.Config{}
	require.NoError(t, g.Reconfigure(cfg))
	assert.Equal(t, throttle.Status{}, g.Snapshot().Throttle)
	_, info, _ := ExecuteInfo(context.Background(), g, overloaded("get", &ran))
	assert.Equal(t, metrics.Failure, info.Event, "off: nothing is throttled")
}

// TestConservationWithThrottle: with the throttle on (its default source
// of draws, shared by 64 goroutines), every count still agrees with what
// the callers saw, and the throttle refused calls.
func TestConservationWithThrottle(t *testing.T) {
	groups := chaosRegistry(t, circuit.Config{Mode: circuit.ForcedClosed}, nil)
	for _, g := range groups {
		cfg := g.Config()
		cfg.Throttle = throttle.Config{K: 1.2}
		require.NoError(t, g.Reconfigure(cfg))
	}
	const calls = chaosCalls / 4
	total, throttled := chaosRefusals(t, groups, calls, metrics.Throttled)
	assert.Positive(t, throttled, "the throttle refused calls")
	t.Logf("%d of %d calls throttled", throttled, total)
}
