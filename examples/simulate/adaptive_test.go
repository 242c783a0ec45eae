package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shortAdaptive is the scenario at half the workers (30 of 25 ms, 15
// after the capacity change; limits scaled likewise) and shorter phases:
// what a test can afford. Its band is 35%: the limit's headroom, √limit,
// is a larger share of a smaller capacity (√19 is 29% of 15).
func shortAdaptive() AdaptiveParams {
	p := DefaultAdaptiveParams()
	p.Phases = []AdaptivePhase{
		{Until: 5 * time.Second, Load: 0.5, Workers: 30},
		{Until: 15 * time.Second, Load: 2, Workers: 30},
		{Until: 25 * time.Second, Load: 2, Workers: 15},
		{Until: 35 * time.Second, Load: 2, Workers: 30},
		{Until: 40 * time.Second, Load: 0.5, Workers: 30},
	}
	p.Statics = []int{30, 45}
	p.TooLarge = 300
	p.Adaptive.Max = 300
	p.Band = 0.35
	return p
}

// TestAdaptiveMeetsItsTargets runs the short scenario: the adaptive limit's
// goodput is within 10% of the best static limit's, its p99 at least 3x
// lower than the too-large limit's, and the limit comes within the band of
// the workers within 10 s of each change and stays there.
func TestAdaptiveMeetsItsTargets(t *testing.T) {
	p := shortAdaptive()
	ad, err := SimulateAdaptive(p, 0)
	require.NoError(t, err)
	var best AdaptiveRun
	for _, l := range p.Statics {
		r, err := SimulateAdaptive(p, l)
		require.NoError(t, err)
		if r.Total > best.Total {
			best = r
		}
	}
	big, err := SimulateAdaptive(p, p.TooLarge)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, ad.Goodput(p), 0.9*best.Goodput(p), "goodput: adaptive %.0f, best static (%d) %.0f", ad.Goodput(p), best.Limit, best.Goodput(p))
	assert.GreaterOrEqual(t, float64(big.TotalP99), 3*float64(ad.TotalP99), "p99: adaptive %v, too large %v", ad.TotalP99, big.TotalP99)
	settle := ad.Settle(p)
	require.Len(t, settle, 3, "the load step and the two capacity changes")
	for i, d := range settle {
		assert.GreaterOrEqual(t, d, time.Duration(0), "change %d: the limit settles", i)
		assert.LessOrEqual(t, d, 10*time.Second, "change %d", i)
	}
	assert.Positive(t, ad.Rejected, "the limit refuses what the dependency cannot take")
}

func TestAdaptiveScenarioIsDeterministic(t *testing.T) {
	p := shortAdaptive()
	p.Phases = p.Phases[:2]
	a, err := SimulateAdaptive(p, 0)
	require.NoError(t, err)
	b, err := SimulateAdaptive(p, 0)
	require.NoError(t, err)
	assert.Equal(t, a, b)
	var out, stderr bytes.Buffer
	assert.Equal(t, 2, run([]string{"-scenario", "adaptive", "-duration", "10s"}, &out, &stderr))
	assert.Contains(t, stderr.String(), "-duration does not apply to -scenario adaptive")
}
