package command

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/metrics"
)

func TestPresetValues(t *testing.T) {
	type row struct {
		timeout     time.Duration
		minRequests int
		ratio       float64
		slow        time.Duration
		slowRatio   float64
		open        time.Duration
		probes      int
	}
	want := map[string]row{
		presetL1: {80 * time.Millisecond, 20, 0.5, 100 * time.Millisecond, 0.6, 5 * time.Second, 3},
		presetL2: {120 * time.Millisecond, 20, 0.4, 150 * time.Millisecond, 0.5, 10 * time.Second, 2},
		presetL3: {150 * time.Millisecond, 10, 0.2, 200 * time.Millisecond, 0.3, 15 * time.Second, 1},
	}
	for name, w := range want {
		c, err := Preset(name)
		require.NoError(t, err)
		require.Equal(t, c.Breaker, c.CommandBreaker, "%s: both breakers alike", name)
		got := row{c.Timeout, c.Breaker.MinRequests, c.Breaker.FailureRatio, c.Breaker.SlowCallDuration,
			c.Breaker.SlowCallRatio, c.Breaker.OpenDuration, c.Breaker.HalfOpenProbes}
		assert.Equal(t, w, got, name)
		assert.Equal(t, 10*time.Second, c.Breaker.Window.Length, name)
	}
	for _, name := range presetNames {
		c, err := Preset(name)
		require.NoError(t, err)
		require.NoError(t, c.Validate(), name)
	}
	nd, _ := Preset(presetNeverDegrade)
	assert.True(t, nd.NoFallback)
	_, err := Preset("l4")
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorContains(t, err, "l1, l2, l3, strong, never-degrade, dependency, govkit")
}

// TestNoFallbackFailsLoudly: in a NoFallback group a command's Fallback is
// never called; the caller gets the error, and the value is never degraded.
func TestNoFallbackFailsLoudly(t *testing.T) {
	cfg, err := Preset(presetNeverDegrade)
	require.NoError(t, err)
	cfg.Strategy = Semaphore
	g, _ := newTestGroup(t, cfg)
	called := false
	charge := opFB[int]{op[int]{"charge", fail[int](errBoom)}, func(context.Context, error) (int, error) {
		called = true
		return 1, nil
	}}
	v, info, err := ExecuteInfo(context.Background(), g, charge)
	require.ErrorIs(t, err, errBoom)
	assert.False(t, called, "the fallback must not run")
	assert.Zero(t, v)
	assert.False(t, info.Degraded)
	assert.True(t, info.Events.Has(metrics.FallbackMissing))

	// Live: turning NoFallback off lets the fallback serve again.
	require.NoError(t, g.Reconfigure(changed(g, func(c *GroupConfig) { c.NoFallback = false })))
	v, err = Execute(context.Background(), g, charge)
	require.NoError(t, err)
	assert.Equal(t, 1, v)
}

// TestPresetDependencyRecoversFast runs the breaker of presetDependency on
// a virtual clock: it trips on 20 calls at 50% failures, its open period
// doubles from 200 ms to a cap of 400 ms while trials fail, a failed probe
// reopens it, and once the dependency heals it closes
// within one capped open period plus five probes.
func TestPresetDependencyRecoversFast(t *testing.T) {
	cfg, err := Preset(presetDependency)
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())
	assert.Equal(t, cfg.Breaker, cfg.CommandBreaker)
	clock := new(metrics.ManualClock)
	bc := cfg.Breaker
	bc.Clock, bc.Logger = clock, discardLogger
	b, err := circuit.New(bc)
	require.NoError(t, err)
	call := func(o metrics.Event) error {
		p, err := b.Allow()
		if err != nil {
			return err
		}
		p.Record(o, time.Millisecond)
		return nil
	}
	for i := range 19 {
		require.NoError(t, call([]metrics.Event{metrics.Success, metrics.Failure}[i%2]))
	}
	require.Equal(t, circuit.Closed, b.State(), "19 calls: below the minimum")
	require.NoError(t, call(metrics.Failure))
	require.Equal(t, circuit.Open, b.State(), "20 calls, 10 failed: tripped")

	// Failed trials: 200 ms, then 400 ms, then still 400 ms (the cap).
	for _, open := range []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond} {
		clock.Advance(open - time.Millisecond)
		require.ErrorIs(t, call(metrics.Success), circuit.ErrOpen, "still open just before %v", open)
		clock.Advance(time.Millisecond)
		require.NoError(t, call(metrics.Failure), "a probe after %v", open)
		require.Equal(t, circuit.Open, b.State(), "a failed probe reopens it")
	}

	// Healed: after at most the cap, five probes close it, four do not.
	clock.Advance(400 * time.Millisecond)
	for range 4 {
		require.NoError(t, call(metrics.Success))
	}
	require.Equal(t, circuit.HalfOpen, b.State(), "four successes: still on trial")
	require.NoError(t, call(metrics.Success))
	require.Equal(t, circuit.Closed, b.State())
}

// TestPresetGovkit: the source's defaults, field by field.
func TestPresetGovkit(t *testing.T) {
	cfg, err := Preset(presetGovkit)
	require.NoError(t, err)
	b := cfg.Breaker
	assert.Equal(t, metrics.Window{Length: 5 * time.Second, Buckets: 5}, b.Window)
	assert.Equal(t, 20, b.MinRequests)
	assert.Equal(t, 0.5, b.FailureRatio)
	assert.Equal(t, 30*time.Second, b.OpenDuration)
	assert.Equal(t, 2.0, b.OpenBackoff)
	assert.Equal(t, time.Minute, b.OpenMaxDuration)
	assert.Equal(t, 3, b.HalfOpenProbes)
	assert.Equal(t, 3, b.HalfOpenSuccesses)
	assert.Equal(t, b, cfg.CommandBreaker)
}
