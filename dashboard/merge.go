package dashboard

import (
	"math"
	"strings"
)

// event is one decoded stream event: JSON numbers are float64 (exact for
// the integers a stream carries, below 2^53).
type event = map[string]any

// How the aggregate merges the events of one key (a command, or a pool or
// group) from several instances, the way Turbine does, so that the
// unmodified Hystrix Dashboard shows fleet figures:
//   - counts and gauges are summed (rolling counts, in flight, active,
//     queued, pool sizes and queue capacity: the fleet's capacity);
//   - rolling peaks (rollingMaxConcurrentExecutionCount,
//     rollingMaxActiveThreads) and configuration values (other
//     propertyValue_ numbers) take the maximum;
//   - isCircuitBreakerOpen and the other booleans are true if any instance
//     says true: the worst state wins;
//   - reportingHosts is the sum of the instances' reportingHosts (1 each
//     for plain instances), so aggregates of aggregates add up;
//   - the keys a Hystrix Dashboard divides by reportingHosts carry the
//     fleet value times reportingHosts, so that the division shows the
//     fleet value: errorPercentage is the fleet's errorCount over its
//     requestCount; latency means and percentiles are averages of the
//     instances' values weighted by their requestCount (a plain average
//     when no instance had requests), except the "100" percentile, the
//     maximum; the window is the longest of the instances';
//   - strings (names, the isolation strategy) are the first instance's.
//
// Latency percentiles cannot be merged exactly from percentiles: the
// weighted average is close when instances behave alike, and the maximum
// shows the worst call anywhere.

// perHost lists the keys that carry a per-instance value times
// reportingHosts.
var perHost = map[string]bool{
	"errorPercentage":     true,
	"latencyExecute_mean": true,
	"latencyTotal_mean":   true,
	"latencyExecute":      true,
	"latencyTotal":        true,
	"propertyValue_metricsRollingStatisticalWindowInMilliseconds": true,
}

// summedProperties are configuration keys that are capacities, summed like
// the pool sizes they go with.
var summedProperties = map[string]bool{
	"propertyValue_queueSizeRejectionThreshold": true,
}

func numberOf(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case bool:
		if x {
			return 1
		}
	}
	return 0
}

// hostsOf is an event's reportingHosts, 1 when absent or not positive.
func hostsOf(e event) float64 {
	if h := numberOf(e["reportingHosts"]); h > 0 {
		return h
	}
	return 1
}

// mergeHystrix merges HystrixCommand or HystrixThreadPool events of one key.
func mergeHystrix(evs []event) event {
	out := make(event, len(evs[0])+1)
	hosts, requests, errs := 0.0, 0.0, 0.0
	for _, e := range evs {
		hosts += hostsOf(e)
		requests += numberOf(e["requestCount"])
		errs += numberOf(e["errorCount"])
	}
	weights := make([]float64, len(evs))
	for i, e := range evs {
		weights[i] = numberOf(e["requestCount"])
		if requests == 0 {
			weights[i] = 1
		}
	}
	for _, e := range evs {
		for k, v := range e {
			if _, done := out[k]; done {
				continue
			}
			out[k] = mergeKey(k, v, evs, weights, hosts)
		}
	}
	if _, ok := out["errorPercentage"]; ok {
		pct := 0.0
		if requests > 0 {
			pct = math.Floor(100 * errs / requests)
		}
		out["errorPercentage"] = pct * hosts
	}
	out["reportingHosts"] = hosts
	return out
}

// mergeKey merges key k, whose first value is v, over evs.
func mergeKey(k string, v any, evs []event, weights []float64, hosts float64) any {
	switch v.(type) {
	case string, nil:
		return v
	case bool:
		for _, e := range evs {
			if b, _ := e[k].(bool); b {
				return true
			}
		}
		return false
	case map[string]any: // latency percentiles
		out := make(map[string]any)
		for p := range v.(map[string]any) {
			vals := make([]float64, len(evs))
			for i, e := range evs {
				m, _ := e[k].(map[string]any)
				vals[i] = numberOf(m[p]) / hostsOf(e)
			}
			if p == "100" {
				out[p] = math.Floor(maxOf(vals)) * hosts
			} else {
				out[p] = math.Floor(weighted(vals, weights)) * hosts
			}
		}
		return out
	case float64:
		vals := make([]float64, len(evs))
		for i, e := range evs {
			vals[i] = numberOf(e[k])
		}
		switch {
		case k == "currentTime":
			return maxOf(vals)
		case perHost[k]:
			for i, e := range evs {
				vals[i] /= hostsOf(e)
			}
			if strings.HasPrefix(k, "propertyValue_") {
				return maxOf(vals) * hosts
			}
			return math.Floor(weighted(vals, weights)) * hosts
		case strings.HasPrefix(k, "rollingMax"),
			strings.HasPrefix(k, "propertyValue_") && !summedProperties[k]:
			return maxOf(vals)
		}
		return sum(vals)
	}
	return v
}

// nativeSummed are the native events' counts and gauges, summed over the
// instances; nativeWeighted their ratios, averaged weighted by the
// instances' healthRequests.
var (
	nativeSummed = map[string]bool{
		"inFlight": true, "detached": true, "healthRequests": true,
		"capacity": true, "queueCapacity": true, "active": true, "queued": true,
		"largestActive": true, "completed": true, "rejected": true,
		"rollingRejected": true, "rollingExecuted": true,
	}
	nativeWeighted = map[string]bool{"errorRatio": true, "slowRatio": true, "degradedRate": true}
)

// stateRank orders breaker states from best to worst.
func stateRank(s any) int {
	switch s {
	case "open":
		return 2
	case "half-open":
		return 1
	}
	return 0
}

// mergeNative merges BulwarkCommand or BulwarkGroup events of one key: the
// breaker fields (state, mode, reason, time in state, probes,
// transitions...) are those of the instance in the worst state (open over
// half-open over closed; the first instance among equals), groupState the
// worst of all; counts and gauges are summed; ratios are averaged weighted
// by healthRequests; reportingHosts is added.
func mergeNative(evs []event) event {
	worst := 0
	for i, e := range evs {
		if stateRank(e["state"]) > stateRank(evs[worst]["state"]) {
			worst = i
		}
	}
	out := make(event, len(evs[worst])+1)
	for k, v := range evs[worst] {
		out[k] = v
	}
	hosts, requests := 0.0, 0.0
	for _, e := range evs {
		hosts += hostsOf(e)
		requests += numberOf(e["healthRequests"])
	}
	for k := range out {
		vals := make([]float64, len(evs))
		weights := make([]float64, len(evs))
		for i, e := range evs {
			vals[i] = numberOf(e[k])
			weights[i] = numberOf(e["healthRequests"])
			if requests == 0 {
				weights[i] = 1
			}
		}
		switch {
		case nativeSummed[k] || strings.HasPrefix(k, "rollingCount"):
			out[k] = sum(vals)
		case nativeWeighted[k]:
			out[k] = ratio(weighted(vals, weights))
		case k == "currentTime":
			out[k] = maxOf(vals)
		case k == "groupState":
			for _, e := range evs {
				if stateRank(e[k]) > stateRank(out[k]) {
					out[k] = e[k]
				}
			}
		}
	}
	out["reportingHosts"] = hosts
	return out
}

func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

func maxOf(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = max(m, x)
	}
	return finite(m)
}

func weighted(xs, ws []float64) float64 {
	s, w := 0.0, 0.0
	for i, x := range xs {
		s += x * ws[i]
		w += ws[i]
	}
	if w == 0 {
		return 0
	}
	return s / w
}
