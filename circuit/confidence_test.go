package circuit

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/metrics"
)

func TestConfidenceValidate(t *testing.T) {
	for _, c := range []float64{-0.1, 1, 1.5, math.NaN(), math.Inf(1)} {
		err := Config{Confidence: c}.Validate()
		require.ErrorIs(t, err, ErrInvalidConfig, "%v", c)
		assert.ErrorContains(t, err, fmt.Sprintf("Confidence %v must be in (0, 1), or 0 (off)", c))
	}
	for _, c := range []float64{0, 0.5, 0.95, 0.999} {
		assert.NoError(t, Config{Confidence: c}.Validate(), "%v", c)
	}
}

// TestConfidenceBounds checks the Wilson lower bounds against values worked
// out by hand from the formula (p + z²/2n − z√(p(1−p)/n + z²/4n²)) / (1 + z²/n).
func TestConfidenceBounds(t *testing.T) {
	for _, tc := range []struct {
		failures, successes int
		confidence          float64
		want                float64
	}{
		{10, 10, 0.95, 0.2993},     // p 0.5, n 20, z 1.96
		{1000, 1000, 0.95, 0.4781}, // n 2,000
		{16, 4, 0.99, 0.5121},      // p 0.8, n 20, z 2.576
		{0, 20, 0.95, 0},           // no failure: the bound is 0
		{20, 0, 0.95, 0.8389},      // all failures: 1/(1 + z²/n)
	} {
		// A huge MinRequests keeps the breaker closed whatever the counts.
		r := newRig(t, Config{Window: metrics.Window{Length: time.Minute}, MinRequests: 1 << 30, Confidence: tc.confidence})
		for range tc.failures {
			require.NoError(t, r.call(metrics.Failure, false))
		}
		for range tc.successes {
			require.NoError(t, r.call(metrics.Success, false))
		}
		h := r.b.Snapshot().Health
		assert.InDelta(t, tc.want, h.ErrorBound, 1e-4, "%+v", tc)
		assert.InDelta(t, float64(tc.failures)/float64(tc.failures+tc.successes), h.ErrorRatio, 1e-12)
	}
}

func TestConfidenceHoldsWhereTheRatioTrips(t *testing.T) {
	script := "10*s 10*f" // a ratio of 0.5 over 20 calls: its lower bound at 0.95 is 0.30
	plain := newRig(t, Config{MinRequests: 20})
	plain.run(script + " =open")

	r := newRig(t, Config{MinRequests: 20, Confidence: 0.95})
	r.run(script + " =closed")
	// Failures keep coming: the bound rises, and the breaker trips on the
	// first failure that lifts it to the threshold.
	for i := 0; r.b.State() == Closed; i++ {
		require.Less(t, i, 100, "never tripped")
		r.run("f")
	}
	tr := r.transitions()
	require.Len(t, tr, 1)
	h := tr[0].Health
	assert.Equal(t, ReasonErrorRatio, tr[0].Reason)
	assert.GreaterOrEqual(t, h.ErrorBound, 0.5)
	assert.Greater(t, h.ErrorRatio, h.ErrorBound)
	// One failure fewer would have kept it closed.
	k, n := h.Failures+h.Timeouts-1, h.Requests-1
	prev := newRig(t, Config{MinRequests: 20, Confidence: 0.95, Window: metrics.Window{Length: time.Hour}})
	prev.run(fmt.Sprintf("%d*s %d*f =closed", n-k, k))
	assert.Less(t, prev.b.Snapshot().Health.ErrorBound, 0.5)
}

func TestConfidenceJudgesTheSlowRatioToo(t *testing.T) {
	cfg := Config{MinRequests: 20, SlowCallDuration: time.Second, SlowCallRatio: 0.5}
	plain := newRig(t, cfg)
	plain.run("10*s 10*w =open")
	cfg.Confidence = 0.95
	r := newRig(t, cfg)
	r.run("10*s 10*w =closed")
	h := r.b.Snapshot().Health
	assert.InDelta(t, 0.2993, h.SlowBound, 1e-4)
	assert.Equal(t, 0.5, h.SlowRatio)
	for i := 0; r.b.State() == Closed; i++ {
		require.Less(t, i, 100, "never tripped")
		r.run("w")
	}
	assert.Equal(t, []Reason{ReasonSlowRatio}, r.reasons())
	assert.GreaterOrEqual(t, r.transitions()[0].Health.SlowBound, 0.5)
}

func TestReconfigureConfidence(t *testing.T) {
	r := newRig(t, Config{MinRequests: 20, Confidence: 0.95})
	r.run("10*s 9*f =closed")
	require.ErrorContains(t, r.b.engine().CheckReconfigure(r.reconfigured(func(c *Config) { c.Confidence = 1 })), "Confidence 1 must be in (0, 1)")
	// Off: the same window judged by its ratio, 0.5, trips at the next failure.
	require.NoError(t, r.b.Reconfigure(r.reconfigured(func(c *Config) { c.Confidence = 0 })))
	assert.Equal(t, r.b.Snapshot().Health.ErrorRatio, r.b.Snapshot().Health.ErrorBound)
	r.run("f =open")
}
