package command

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/circuit/healthcheck"
	"github.com/bulwark-go/bulwark/metrics"
)

// trippable is a breaker config that opens after 4 failures.
func trippable() circuit.Config {
	return circuit.Config{Window: metrics.Window{Length: time.Second}, MinRequests: 4, OpenDuration: time.Minute}
}

func TestGroupWarmUp(t *testing.T) {
	g, clock := newTestGroup(t, GroupConfig{Strategy: Semaphore, Breaker: trippable(), CommandBreaker: trippable()})
	ctx := context.Background()
	down := errors.New("cold cache")
	call := func(name string) error {
		_, err := Execute(ctx, g, op[int]{name: name, run: fail[int](down)})
		return err
	}
	require.ErrorIs(t, call("a"), down)
	require.NoError(t, g.WarmUp(10*time.Second))
	clock.Advance(time.Second)
	for range 10 {
		require.ErrorIs(t, call("a"), down)
		require.ErrorIs(t, call("b"), down, "b is first used during the warm-up")
	}
	s := g.Snapshot()
	assert.Equal(t, 9*time.Second, s.Breaker.WarmUpLeft)
	for _, c := range s.Commands {
		assert.Equal(t, circuit.Closed, c.Breaker.State, c.Name)
		assert.Equal(t, 9*time.Second, c.Breaker.WarmUpLeft, c.Name)
		assert.Zero(t, c.Breaker.Health.Requests, c.Name)
	}

	clock.Advance(9 * time.Second)
	for range 4 {
		require.ErrorIs(t, call("b"), down)
	}
	require.ErrorIs(t, call("b"), ErrRefused, "counted again once the warm-up is over")

	err := g.WarmUp(-time.Second)
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), `group "deps": WarmUp -1s must not be negative`)
}

// A health checker started on a group's breaker runs while the breaker is
// open and turns it half-open when the dependency answers; once stopped,
// no goroutine is left.
func TestHealthCheckOnGroupBreaker(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var checks atomic.Int64
	var healthy atomic.Bool
	reg, _ := newTestRegistry(t)
	g, err := reg.NewGroup("deps", GroupConfig{Strategy: Semaphore, Breaker: trippable()})
	require.NoError(t, err)
	checker, err := healthcheck.Start(g.Breaker(), healthcheck.Config{Interval: time.Millisecond,
		Check: func(context.Context) error {
			checks.Add(1)
			if !healthy.Load() {
				return errors.New("still down")
			}
			return nil
		}})
	require.NoError(t, err)
	for range 4 {
		_, _ = Execute(context.Background(), g, op[int]{name: "a", run: fail[int](errors.New("down"))})
	}
	require.Equal(t, circuit.Open, g.Breaker().State())
	require.Eventually(t, func() bool { return checks.Load() >= 2 }, 10*time.Second, time.Millisecond)
	healthy.Store(true)
	require.Eventually(t, func() bool { return g.Breaker().State() == circuit.HalfOpen }, 10*time.Second, time.Millisecond)
	checker.Stop()
	require.NoError(t, g.Close(context.Background()))
}
