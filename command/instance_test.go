package command

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/internal/logtest"
	"github.com/bulwark-go/bulwark/metrics"
)

// instanceGroup is a semaphore group whose breakers judge a 10 s window
// (at least 20 calls, 50% failures), with warm-up per instance of warm.
func instanceGroup(t *testing.T, warm time.Duration) (*Group, *metrics.ManualClock) {
	b := circuit.Config{Window: metrics.Window{Length: 10 * time.Second, Buckets: 10}, MinRequests: 20, FailureRatio: 0.5}
	return newTestGroup(t, GroupConfig{Strategy: Semaphore, Breaker: b, CommandBreaker: b, InstanceWarmUp: warm})
}

// calls makes n calls of "get" to instance, failing or not.
func calls(t *testing.T, g *Group, instance string, n int, failing bool) {
	t.Helper()
	run := succeed(1)
	if failing {
		run = fail[int](errBoom)
	}
	for range n {
		_, _ = Execute(context.Background(), g, op[int]{"get", run}, WithInstance(instance))
	}
}

// TestInstanceWarmUpSparesColdInstance: a new instance failing during its
// first minute (cold caches) does not trip the breakers, where the same
// calls trip them without InstanceWarmUp; the metrics count its failures
// either way; once its minute is over, its failures count.
func TestInstanceWarmUpSparesColdInstance(t *testing.T) {
	for _, warm := range []time.Duration{time.Minute, 0} {
		t.Run(fmt.Sprint(warm), func(t *testing.T) {
			g, clock := instanceGroup(t, warm)
			calls(t, g, "old-1", 1, false) // the old instance is known...
			clock.Advance(2 * time.Minute) // ...and long warm
			calls(t, g, "old-1", 10, false)
			calls(t, g, "new-1", 30, true) // 75% of the window fails
			if warm == 0 {
				assert.Equal(t, circuit.Open, g.Breaker().State(), "control: without warm-up the cold errors trip it")
				return
			}
			assert.Equal(t, circuit.Closed, g.Breaker().State(), "the cold instance's errors are not counted")
			b, _ := g.CommandBreaker("get")
			assert.Equal(t, circuit.Closed, b.State())
			assert.EqualValues(t, 10, g.Breaker().Snapshot().Health.Requests, "the breaker saw the warm instance only")
			assert.EqualValues(t, 30, counts(t, g, "get")[metrics.Failure], "the metrics count every failure")

			clock.Advance(time.Minute) // new-1's minute is over; the window has rolled too
			calls(t, g, "old-1", 5, false)
			calls(t, g, "new-1", 20, true)
			assert.Equal(t, circuit.Open, g.Breaker().State(), "a warm instance's failures count")
		})
	}
}

// TestInstanceWarmUpOutageStillTrips: an outage across the dependency
// trips the breakers while a new instance warms up, because the warm
// instances' failures count, where a warm-up of the whole breaker
// (Group.WarmUp) hides the same outage.
func TestInstanceWarmUpOutageStillTrips(t *testing.T) {
	g, clock := instanceGroup(t, time.Minute)
	calls(t, g, "old-1", 1, false)
	calls(t, g, "old-2", 1, false)
	clock.Advance(2 * time.Minute)
	calls(t, g, "new-1", 5, true) // a rollout begins: new-1 warming
	clock.Advance(10 * time.Second)
	calls(t, g, "old-1", 12, true) // then everything fails
	calls(t, g, "old-2", 12, true)
	calls(t, g, "new-1", 12, true)
	assert.Equal(t, circuit.Open, g.Breaker().State(), "the outage trips the group's breaker")
	b, _ := g.CommandBreaker("get")
	assert.Equal(t, circuit.Open, b.State(), "and the command's")

	// The same outage with the whole breaker warming up stays hidden.
	w, wclock := instanceGroup(t, 0)
	require.NoError(t, w.WarmUp(time.Minute))
	wclock.Advance(10 * time.Second)
	calls(t, w, "old-1", 12, true)
	calls(t, w, "old-2", 12, true)
	calls(t, w, "new-1", 12, true)
	assert.Equal(t, circuit.Closed, w.Breaker().State(), "a whole-breaker warm-up hides the outage")
}

// TestInstanceWarmUpBounded: calls without an instance are always counted;
// past maxWarmInstances a new instance gets no warm-up, logged once.
func TestInstanceWarmUpBounded(t *testing.T) {
	var logs logtest.Buffer
	reg := NewRegistry(RegistryConfig{Clock: new(metrics.ManualClock), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("g", GroupConfig{Strategy: Semaphore, InstanceWarmUp: time.Minute})
	require.NoError(t, err)
	_, err = Execute(context.Background(), g, op[int]{"get", succeed(1)})
	require.NoError(t, err)
	assert.EqualValues(t, 1, g.Breaker().Snapshot().Health.Requests, "no instance: counted")

	for i := range maxWarmInstances {
		assert.True(t, g.instances.cold(g, fmt.Sprint("i", i), 0, time.Minute))
	}
	assert.False(t, g.instances.cold(g, "one-too-many", 0, time.Minute))
	assert.False(t, g.instances.cold(g, "two-too-many", 0, time.Minute))
	assert.True(t, g.instances.cold(g, "i7", 59*time.Second, time.Minute), "a known instance keeps its warm-up")
	assert.Equal(t, 1, strings.Count(logs.String(), "instance limit reached"))

	_, err = reg.NewGroup("bad", GroupConfig{InstanceWarmUp: -time.Second})
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorContains(t, err, "InstanceWarmUp")
}
