package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestThrottleKeepsTheLoadNearCapacity runs the scenario (shorter under
// -race): without a throttle the breakers flap and the dependency gets a
// trickle; with K 1.1 the load reaching it stays within 10% of its
// capacity, every second within 25%, and the breakers never trip.
func TestThrottleKeepsTheLoadNearCapacity(t *testing.T) {
	p := DefaultThrottleParams()
	if raceEnabled {
		p.Duration = time.Minute
	}
	rows, err := SimulateThrottle(p)
	require.NoError(t, err)
	require.Len(t, rows, 1+len(p.Ks))
	none := rows[0]
	assert.Zero(t, none.K)
	assert.Greater(t, none.Trips, 10, "without a throttle the breakers flap")
	assert.Less(t, none.Sent, 0.5*p.Capacity, "and the dependency gets a trickle")
	last := rows[len(rows)-1]
	require.Equal(t, 1.1, last.K)
	assert.Zero(t, last.Trips)
	assert.Zero(t, last.Shorted)
	assert.InDelta(t, p.Capacity, last.Sent, 0.1*p.Capacity)
	assert.GreaterOrEqual(t, last.MinSent, 0.75*p.Capacity)
	assert.LessOrEqual(t, last.MaxSent, 1.25*p.Capacity)
	assert.InDelta(t, p.Offered-last.Sent, last.Throttled, 1, "every call not sent was throttled")
	for _, r := range rows[1:] {
		if r.K < 2 { // (K−1)/K of what is sent is refused: below the breakers' 0.5
			assert.Zero(t, r.Trips, "K %v", r.K)
			assert.InDelta(t, r.K*p.Capacity, r.Sent, 0.1*p.Capacity, "K %v: sent settles near K × capacity", r.K)
		}
	}
}

func TestThrottleScenarioIsDeterministic(t *testing.T) {
	args := []string{"-scenario", "throttle", "-duration", "40s"}
	var a, b, stderr bytes.Buffer
	require.Equal(t, 0, run(args, &a, &stderr), stderr.String())
	require.Equal(t, 0, run(args, &b, &stderr), stderr.String())
	assert.Equal(t, a.String(), b.String())
	assert.Contains(t, a.String(), "K 1.1")
	assert.Equal(t, 2, run([]string{"-scenario", "throttle", "-capacity", "1"}, &a, &stderr))
	assert.Contains(t, stderr.String(), "-capacity 1 must be between 10 and 100000")
	assert.Equal(t, 2, run([]string{"-scenario", "throttle", "-duration", "10s"}, &a, &stderr), "shorter than the settling time")
}
