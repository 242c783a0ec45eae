package command

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
		PresetL1: {80 * time.Millisecond, 20, 0.5, 100 * time.Millisecond, 0.6, 5 * time.Second, 3},
		PresetL2: {120 * time.Millisecond, 20, 0.4, 150 * time.Millisecond, 0.5, 10 * time.Second, 2},
		PresetL3: {150 * time.Millisecond, 10, 0.2, 200 * time.Millisecond, 0.3, 15 * time.Second, 1},
	}
	for name, w := range want {
		c, err := Preset(name)
		require.NoError(t, err)
		require.Equal(t, c.Breaker, c.CommandBreaker, "%s: both breakers alike", name)
		got := row{c.Timeout, c.Breaker.MinRequests, c.Breaker.FailureRatio, c.Breaker.SlowCallDuration,
			c.Breaker.SlowCallRatio, c.Breaker.Open.Duration, c.Breaker.HalfOpen.Probes}
		assert.Equal(t, w, got, name)
		assert.Equal(t, 10*time.Second, c.Breaker.Window.Length, name)
	}
	for _, name := range PresetNames() {
		c, err := Preset(name)
		require.NoError(t, err)
		require.NoError(t, c.Validate(), name)
	}
	nd, _ := Preset(PresetNeverDegrade)
	assert.True(t, nd.NoFallback)
	_, err := Preset("l4")
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorContains(t, err, "l1, l2, l3, strong, never-degrade")
}

// TestNoFallbackFailsLoudly: in a NoFallback group a command's Fallback is
// never called; the caller gets the error, and the value is never degraded.
func TestNoFallbackFailsLoudly(t *testing.T) {
	cfg, err := Preset(PresetNeverDegrade)
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
