package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCoalesceScenario: over 1 s, coalescing turns 2,000 origin reads into
// one per key per origin latency, the breaker counts only those, every
// other call is COALESCED, and with a LastGood the calls that join a
// refresh are answered at once.
func TestCoalesceScenario(t *testing.T) {
	p := DefaultCoalesceParams()
	p.Duration = time.Second
	rs, err := SimulateCoalesce(p)
	require.NoError(t, err)
	off, on, stale := rs[0], rs[1], rs[2]
	calls := int(p.Rate * p.Duration.Seconds())
	runs := p.Keys * int(p.Duration/p.Latency)
	assert.Equal(t, calls, off.Runs, "without coalescing, a read per call")
	assert.EqualValues(t, calls, off.BreakerCounted)
	for _, r := range []CoalesceResult{on, stale} {
		assert.Equal(t, calls, r.Calls, r.Mode)
		assert.Equal(t, runs, r.Runs, "%s: one read per key per %v", r.Mode, p.Latency)
		assert.EqualValues(t, runs, r.Success, r.Mode)
		assert.EqualValues(t, calls-runs, r.Coalesced, r.Mode)
		assert.EqualValues(t, runs, r.BreakerCounted, r.Mode)
		assert.Equal(t, p.Keys, r.PeakRuns, r.Mode)
	}
	assert.Equal(t, p.Latency/2, on.P50, "a caller waits for the rest of the Run it joins")
	assert.Zero(t, stale.P50, "stale while revalidate answers at once")
	// Every call that joined a refresh after the first read of its key
	// was answered with the last good value.
	firstReads := int(p.Rate*p.Latency.Seconds()) - p.Keys
	assert.Equal(t, calls-runs-firstReads, stale.Degraded)
}

// TestCoalesceScenarioDeterministic: the same table twice.
func TestCoalesceScenarioDeterministic(t *testing.T) {
	p := DefaultCoalesceParams()
	p.Duration = 500 * time.Millisecond
	var a, b bytes.Buffer
	require.NoError(t, runCoalesce(p, &a))
	require.NoError(t, runCoalesce(p, &b))
	assert.Equal(t, a.String(), b.String())
}
