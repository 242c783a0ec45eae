package dashboard

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Latencies merge as request-weighted averages (the maximum as the
// maximum), times reportingHosts, and an aggregate of aggregates adds up.
func TestMergeHystrixLatencyAndTiers(t *testing.T) {
	a := event{"type": TypeHystrixCommand, "requestCount": 30.0, "errorCount": 3.0, "errorPercentage": 10.0,
		"latencyExecute_mean": 10.0, "latencyExecute": map[string]any{"50": 10.0, "100": 50.0},
		"rollingMaxConcurrentExecutionCount": 4.0, "rollingCountSuccess": 27.0,
		"propertyValue_metricsRollingStatisticalWindowInMilliseconds": 10000.0, "isCircuitBreakerOpen": false}
	// b is itself an aggregate of two hosts: its per-host keys are doubled.
	b := event{"type": TypeHystrixCommand, "requestCount": 10.0, "errorCount": 7.0, "errorPercentage": 140.0, "reportingHosts": 2.0,
		"latencyExecute_mean": 60.0, "latencyExecute": map[string]any{"50": 60.0, "100": 400.0},
		"rollingMaxConcurrentExecutionCount": 2.0, "rollingCountSuccess": 3.0,
		"propertyValue_metricsRollingStatisticalWindowInMilliseconds": 20000.0, "isCircuitBreakerOpen": true}
	m := mergeHystrix([]event{a, b})
	assert.Equal(t, 3.0, m["reportingHosts"])
	assert.Equal(t, 30.0, m["rollingCountSuccess"], "counts sum")
	assert.Equal(t, 4.0, m["rollingMaxConcurrentExecutionCount"], "peaks take the maximum")
	assert.Equal(t, true, m["isCircuitBreakerOpen"], "the worst state wins")
	assert.Equal(t, 3*25.0, m["errorPercentage"], "10 errors of 40 requests, times 3 hosts")
	// (10×30 + 30×10) / 40 = 15 per host.
	assert.Equal(t, 3*15.0, m["latencyExecute_mean"])
	lat := m["latencyExecute"].(map[string]any)
	assert.Equal(t, 3*15.0, lat["50"])
	assert.Equal(t, 3*200.0, lat["100"], "the largest maximum")
	assert.Equal(t, 3*10000.0, m["propertyValue_metricsRollingStatisticalWindowInMilliseconds"])
}

// The native events take their breaker from the worst instance.
func TestMergeNativeWorstBreaker(t *testing.T) {
	closed := event{"type": TypeBulwarkCommand, "state": "closed", "reason": "", "inFlight": 2.0,
		"healthRequests": 30.0, "errorRatio": 0.0, "groupState": "half-open"}
	open := event{"type": TypeBulwarkCommand, "state": "open", "reason": "error_ratio", "inFlight": 1.0,
		"healthRequests": 10.0, "errorRatio": 0.8, "groupState": "closed"}
	m := mergeNative([]event{closed, open})
	assert.Equal(t, "open", m["state"])
	assert.Equal(t, "error_ratio", m["reason"])
	assert.Equal(t, "half-open", m["groupState"])
	assert.Equal(t, 3.0, m["inFlight"])
	assert.Equal(t, 0.2, m["errorRatio"], "weighted by healthRequests")
	assert.Equal(t, 2.0, m["reportingHosts"])
}

// An instance keeps at most MaxEvents keys, however many it sends.
func TestUpstreamBoundsKeys(t *testing.T) {
	u := &upstream{a: &Aggregate{cfg: AggregateConfig{MaxEvents: 2}}, events: make(map[string]stored)}
	assert.True(t, u.store(map[string]event{"a": {}, "b": {}}))
	assert.False(t, u.store(map[string]event{"c": {}}))
	assert.True(t, u.store(map[string]event{"a": {"x": 1.0}}), "a known key is updated")
	assert.Len(t, u.events, 2)
}

// recordMerged reads every count the rates need from the merged event, by
// the keys the stream encodes them under, and one instance's window.
func TestRecordMergedMatchesRatesOfTheEvent(t *testing.T) {
	hc := hystrixCommand{Name: "Get", Group: "api",
		RollingCountSuccess: 1, RollingCountFailure: 2, RollingCountTimeout: 4, RollingCountBadRequests: 8,
		RollingCountShortCircuited: 16, RollingCountThreadPoolRejected: 32, RollingCountSemaphoreRejected: 64,
		MetricsRollingStatisticalWindowInMillis: 5000}
	wantRate, wantErrs := rates(&hc)
	data, err := json.Marshal(&hc)
	require.NoError(t, err)
	var merged event
	require.NoError(t, json.Unmarshal(data, &merged))
	merged["reportingHosts"] = 2.0
	merged["propertyValue_metricsRollingStatisticalWindowInMilliseconds"] = 2 * 5000.0

	h := newHistory(time.Minute, time.Second)
	recordMerged(h, time.UnixMilli(1000), merged)
	s := h.series["api\x00Get"]
	require.NotNil(t, s)
	p := s.newest()
	assert.Equal(t, wantRate, p.rate)
	assert.Equal(t, wantErrs, p.errs)
	assert.Equal(t, 127/5.0, p.rate, "every count, over one instance's 5 s window")
}
