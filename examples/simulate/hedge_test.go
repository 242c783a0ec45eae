package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// smallHedgeParams returns the hedge scenario over length of tail and an
// outage run of 2 × length with an outage from length/2 to 3/2 length,
// whose slow failures take 500 ms.
func smallHedgeParams(length time.Duration) HedgeParams {
	p := DefaultHedgeParams()
	p.Duration, p.OutageRun = length, 2*length
	p.OutageStart, p.OutageEnd, p.SlowFailure = length/2, 3*length/2, 500*time.Millisecond
	return p
}

// TestHedgeMeetsItsTargets: over 5 s of a tail where 2% of attempts take
// 20 times the median, hedging cuts the callers' p99 by at least half for
// at most 5% more attempts, every call succeeds, and each hedge is one
// HEDGED; in both outages the breakers open and no hedge starts while one
// is open or half-open.
func TestHedgeMeetsItsTargets(t *testing.T) {
	p := smallHedgeParams(5 * time.Second)
	tail, outage, err := SimulateHedge(p)
	require.NoError(t, err)
	require.Len(t, tail, 3)
	off := tail[0]
	assert.Zero(t, off.Hedges)
	assert.Greater(t, off.P99, 10*p.Median, "without hedging the tail sets the p99")
	for _, r := range tail {
		assert.Equal(t, 1000, r.Calls, r.Mode)
		assert.Equal(t, r.Calls, r.Success, r.Mode)
		assert.Equal(t, r.Calls+r.Hedges, r.Attempts, r.Mode)
		assert.EqualValues(t, r.Hedges, r.Hedged, "%s: each hedge, the loser of its race, is HEDGED", r.Mode)
		if r.Mode == off.Mode {
			continue
		}
		assert.Positive(t, r.Hedges, r.Mode)
		assert.LessOrEqual(t, r.ExtraLoad(), 0.05, r.Mode)
		assert.LessOrEqual(t, r.P99, off.P99/2, "%s: p99 %v against %v", r.Mode, r.P99, off.P99)
		assert.Equal(t, off.P50, r.P50, "%s: a call faster than the delay is not hedged", r.Mode)
	}
	require.Len(t, outage, 4)
	for _, r := range outage {
		assert.GreaterOrEqual(t, r.OpenedAfter, time.Duration(0), "%s (%s): a breaker opened", r.Mode, r.Outage)
		assert.Less(t, r.OutageAttempts, r.OutageCalls, "%s (%s): calls refused while open", r.Mode, r.Outage)
		assert.Zero(t, r.HedgesWhileNotClosed, "%s (%s)", r.Mode, r.Outage)
		assert.Equal(t, r.OutageHedges, r.HedgesBeforeOpen, "%s (%s): every hedge of the outage before the breakers opened", r.Mode, r.Outage)
	}
	assert.Zero(t, outage[0].OutageHedges+outage[2].OutageHedges, "no hedge without hedging")
}

// TestHedgeScenarioIsDeterministic: the same tables twice.
func TestHedgeScenarioIsDeterministic(t *testing.T) {
	p := smallHedgeParams(2 * time.Second)
	var a, b bytes.Buffer
	require.NoError(t, runHedge(p, &a))
	require.NoError(t, runHedge(p, &b))
	assert.Equal(t, a.String(), b.String())
	assert.Contains(t, a.String(), "hedge p95")
}

// TestHedgeScenarioFlags: -scenario hedge takes -duration, refuses a bad
// one and the other scenarios' flags, before running anything.
func TestHedgeScenarioFlags(t *testing.T) {
	for _, args := range [][]string{{"-duration", "0s"}, {"-duration", "2h"}, {"-rate", "10"}, {"-qps", "10"}} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, run(append([]string{"-scenario", "hedge"}, args...), &stdout, &stderr), args)
		assert.Empty(t, stdout.String(), args)
		assert.Contains(t, stderr.String(), args[0], args)
	}
}
