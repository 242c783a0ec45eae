package dashboard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Latencies merge as request-weighted averages (the maximum as the
// maximum), times reportingHosts, and an aggregate of aggregates adds up.
func TestMergeHystrixLatencyAndTiers(t *testing.T) {
	a := &hystrixCommand{Type: TypeHystrixCommand, RequestCount: 30, ErrorCount: 3, ErrorPercentage: 10,
		LatencyExecuteMean: 10, LatencyExecute: percentiles{P50: 10, P100: 50},
		RollingMaxConcurrentExecutionCount: 4, RollingCountSuccess: 27,
		MetricsRollingStatisticalWindowInMillis: 10000, IsCircuitBreakerOpen: false}
	// b is itself an aggregate of two hosts: its per-host keys are doubled.
	b := &hystrixCommand{Type: TypeHystrixCommand, RequestCount: 10, ErrorCount: 7, ErrorPercentage: 140, ReportingHosts: 2,
		LatencyExecuteMean: 60, LatencyExecute: percentiles{P50: 60, P100: 400},
		RollingMaxConcurrentExecutionCount: 2, RollingCountSuccess: 3,
		MetricsRollingStatisticalWindowInMillis: 20000, IsCircuitBreakerOpen: true}
	m := mergeHystrix([]*hystrixCommand{a, b})
	assert.Equal(t, int64(3), m.ReportingHosts)
	assert.Equal(t, int64(30), m.RollingCountSuccess, "counts sum")
	assert.Equal(t, int64(4), m.RollingMaxConcurrentExecutionCount, "peaks take the maximum")
	assert.True(t, m.IsCircuitBreakerOpen, "the worst state wins")
	assert.Equal(t, int64(3*25), m.ErrorPercentage, "10 errors of 40 requests, times 3 hosts")
	// (10×30 + 30×10) / 40 = 15 per host.
	assert.Equal(t, int64(3*15), m.LatencyExecuteMean)
	assert.Equal(t, int64(3*15), m.LatencyExecute.P50)
	assert.Equal(t, int64(3*200), m.LatencyExecute.P100, "the largest maximum")
	assert.Equal(t, int64(3*10000), m.MetricsRollingStatisticalWindowInMillis)
	assert.Equal(t, TypeHystrixCommand, m.Type)
}

// The native events take their breaker from the worst instance.
func TestMergeNativeWorstBreaker(t *testing.T) {
	closed := &nativeCommand{bulwarkCommand: bulwarkCommand{Type: TypeBulwarkCommand, InFlight: 2, GroupState: "half-open",
		breaker: breaker{State: "closed", HealthRequests: 30}}}
	open := &nativeCommand{bulwarkCommand: bulwarkCommand{Type: TypeBulwarkCommand, InFlight: 1, GroupState: "closed",
		breaker: breaker{State: "open", Reason: "error_ratio", HealthRequests: 10, ErrorRatio: 0.8}},
		Transitions: transitions{{From: "closed", To: "open", Reason: "error_ratio"}}}
	m := mergeNativeCommands([]*nativeCommand{closed, open})
	assert.Equal(t, "open", m.State)
	assert.Equal(t, "error_ratio", m.Reason)
	assert.Equal(t, transitions{{From: "closed", To: "open", Reason: "error_ratio"}}, m.Transitions, "the worst instance's")
	assert.Equal(t, "half-open", m.GroupState)
	assert.Equal(t, int64(3), m.InFlight)
	assert.Equal(t, int64(40), m.HealthRequests)
	assert.Equal(t, 0.2, m.ErrorRatio, "weighted by healthRequests")
	assert.Equal(t, int64(2), m.ReportingHosts)
}

// An instance keeps at most MaxEvents keys, however many it sends.
func TestUpstreamBoundsKeys(t *testing.T) {
	u := &upstream{a: &Aggregate{cfg: AggregateConfig{MaxEvents: 2}}, events: make(map[string]stored)}
	assert.True(t, u.store(map[string]upEvent{"a": &hystrixThreadPool{}, "b": &hystrixThreadPool{}}))
	assert.False(t, u.store(map[string]upEvent{"c": &hystrixThreadPool{}}))
	assert.True(t, u.store(map[string]upEvent{"a": &hystrixThreadPool{CurrentActiveCount: 1}}), "a known key is updated")
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
	merged := hc
	merged.ReportingHosts = 2
	merged.MetricsRollingStatisticalWindowInMillis = 2 * 5000

	h := newHistory(time.Minute, time.Second)
	recordMerged(h, time.UnixMilli(1000), merged)
	s := h.series["api\x00Get"]
	require.NotNil(t, s)
	p := s.newest()
	assert.Equal(t, wantRate, p.rate)
	assert.Equal(t, wantErrs, p.errs)
	assert.Equal(t, 127/5.0, p.rate, "every count, over one instance's 5 s window")
}
