package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reasons returns the reasons of the transitions of r.
func reasons(r Result) []string {
	var out []string
	for _, t := range r.Transitions {
		out = append(out, t.Reason)
	}
	return out
}

// The figures of docs/policies.md, "Health-check recovery".
func TestHealthCheckShortensRecovery(t *testing.T) {
	p := DefaultParams()
	p.Open = 5 * time.Second
	p.OutageEnd = 10 * time.Second
	p.Duration = 20 * time.Second
	without, err := Simulate(p)
	require.NoError(t, err)
	assert.Equal(t, 2505.0, without.RecoveryLagMS, "waits out the open duration")
	assert.Zero(t, without.HealthChecks)

	p.HealthCheck = 500 * time.Millisecond
	with, err := Simulate(p)
	require.NoError(t, err)
	assert.Equal(t, 505.0, with.RecoveryLagMS, "the first check after the outage passes")
	assert.Equal(t, 16, with.HealthChecks)
	assert.Equal(t, []string{"error_ratio", "open_elapsed", "probe_failed", "health_check", "probes_succeeded"}, reasons(with))
	assert.Equal(t, without.DownstreamFailures, with.DownstreamFailures, "checks are not user requests")
}

func TestRampSchedules(t *testing.T) {
	forwarded := map[string]int{}
	for _, ramp := range []string{"", rampLinear, rampDoubling} {
		p := DefaultParams()
		p.Duration = 40 * time.Second
		if ramp != "" {
			p.Ramp, p.RampUp = ramp, 30*time.Second
		}
		r, err := Simulate(p)
		require.NoError(t, err)
		assert.Equal(t, 505.0, r.RecoveryLagMS, ramp)
		forwarded[ramp] = r.ForwardedAfterOutage
	}
	assert.Equal(t, map[string]int{"": 5901, rampLinear: 3231, rampDoubling: 2463}, forwarded)
}

func TestHalfOpenFailuresFlag(t *testing.T) {
	p := DefaultParams()
	p.HalfOpenFailures = 2
	r, err := Simulate(p)
	require.NoError(t, err)
	// Each trial takes two failed probes, 5 ms apart at 200 req/s.
	assert.Equal(t, Transition{AtMS: 3500, From: "half-open", To: "open", Reason: "probe_failed"}, r.Transitions[2])
	assert.Equal(t, 520.0, r.RecoveryLagMS)
}

func TestWarmUpFlag(t *testing.T) {
	p := DefaultParams()
	p.WarmUp = 3 * time.Second
	r, err := Simulate(p)
	require.NoError(t, err)
	assert.Equal(t, Transition{AtMS: 3095, From: "closed", To: "open", Reason: "error_ratio"}, r.Transitions[0],
		"nothing counted before 3 s, then half a window of failures")
}

func TestPolicyTableRows(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"-open", "5s", "-outage", "2s-10s", "-duration", "20s", "-health-check", "500ms"},
		&stdout, &stderr), stderr.String())
	for _, want := range []string{"recovery lag                    505ms", "health checks                      16",
		"10495 ms  open      -> half-open  health_check"} {
		assert.Contains(t, stdout.String(), want)
	}
}
