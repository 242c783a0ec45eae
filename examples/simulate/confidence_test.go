package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConfidenceMeetsItsTargets runs the scenario (shorter than the
// default under -race): the confidence rule never trips on the background
// failures, the plain ratio does, and the rule detects the outage within
// twice the plain ratio's delay.
func TestConfidenceMeetsItsTargets(t *testing.T) {
	p := DefaultConfidenceParams()
	if raceEnabled {
		p.Duration, p.Trials = 2*time.Minute, 5
	}
	rows, err := SimulateConfidence(p)
	require.NoError(t, err)
	require.Len(t, rows, 2*len(p.Rates))
	plainTrips := 0
	for i := 0; i < len(rows); i += 2 {
		ratio, wilson := rows[i], rows[i+1]
		require.Equal(t, ruleRatio, ratio.Rule)
		require.Equal(t, ruleWilson, wilson.Rule)
		assert.Zero(t, wilson.FalseTrips+wilson.LeadTrips, "%g req/s: no false trip", wilson.Rate)
		assert.Zero(t, wilson.NotClosed)
		assert.Zero(t, wilson.Skipped)
		plainTrips += ratio.FalseTrips + ratio.LeadTrips
		require.Positive(t, ratio.MedianDelay, "%g req/s", ratio.Rate)
		assert.LessOrEqual(t, wilson.MedianDelay, 2*ratio.MedianDelay, "%g req/s: detection within 2×", wilson.Rate)
		assert.GreaterOrEqual(t, wilson.MedianDelay, ratio.MedianDelay, "the bound lags the ratio")
	}
	assert.Positive(t, plainTrips, "the plain ratio trips on noise: the scenario tests something")
}

func TestConfidenceScenarioIsDeterministic(t *testing.T) {
	args := []string{"-scenario", "confidence", "-duration", "1m", "-trials", "3"}
	var a, b, stderr bytes.Buffer
	require.Equal(t, 0, run(args, &a, &stderr), stderr.String())
	require.Equal(t, 0, run(args, &b, &stderr), stderr.String())
	assert.Equal(t, a.String(), b.String())
	assert.Contains(t, a.String(), "wilson: confidence 0.95")

	assert.Equal(t, 2, run([]string{"-scenario", "confidence", "-confidence", "1"}, &a, &stderr))
	assert.Contains(t, stderr.String(), "Confidence 1 must be in (0, 1)")
	assert.Equal(t, 2, run([]string{"-scenario", "outage", "-trials", "3"}, &a, &stderr), "a confidence flag")
}
