package dashboard

import (
	"math"
	"reflect"
	"strings"
)

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
//
// The Hystrix events are merged field by field, by the JSON key of each
// field of hystrixCommand and hystrixThreadPool, so that every key the
// stream emits has its rule; the native events by the explicit rules of
// mergeNativeCommands and mergeNativeGroups.

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

// hostsOf is an event's reportingHosts, 1 when absent or not positive.
func hostsOf(reportingHosts int64) float64 {
	if reportingHosts > 0 {
		return float64(reportingHosts)
	}
	return 1
}

// jsonKey is the JSON key of struct field f.
func jsonKey(f reflect.StructField) string {
	key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return key
}

// intField returns v's int64 field name as a float64, 0 if it has none.
func intField(v reflect.Value, name string) float64 {
	if f := v.FieldByName(name); f.IsValid() {
		return float64(f.Int())
	}
	return 0
}

// mergeHystrix merges the HystrixCommand or the HystrixThreadPool events
// of one key (E is hystrixCommand or hystrixThreadPool) by the rules above.
func mergeHystrix[E hystrixCommand | hystrixThreadPool](evs []*E) *E {
	vs := make([]reflect.Value, len(evs))
	hostsEach := make([]float64, len(evs)) // each instance's reportingHosts
	weights := make([]float64, len(evs))   // each instance's requestCount (all 1 without requests)
	hosts, requests, errs := 0.0, 0.0, 0.0
	for i, e := range evs {
		vs[i] = reflect.ValueOf(e).Elem()
		hostsEach[i] = hostsOf(int64(intField(vs[i], "ReportingHosts")))
		hosts += hostsEach[i]
		weights[i] = intField(vs[i], "RequestCount")
		requests += weights[i]
		errs += intField(vs[i], "ErrorCount")
	}
	if requests == 0 {
		for i := range weights {
			weights[i] = 1
		}
	}
	out := new(E)
	ov := reflect.ValueOf(out).Elem()
	vals := make([]float64, len(evs))
	for f := range ov.NumField() {
		key, o := jsonKey(ov.Type().Field(f)), ov.Field(f)
		switch o.Kind() {
		case reflect.String, reflect.Pointer: // names, the strategy, the pool key override
			o.Set(vs[0].Field(f))
		case reflect.Bool:
			for _, v := range vs {
				if v.Field(f).Bool() {
					o.SetBool(true)
				}
			}
		case reflect.Struct: // latency percentiles
			for p := range o.NumField() {
				for i, v := range vs {
					vals[i] = float64(v.Field(f).Field(p).Int()) / hostsEach[i]
				}
				x := weighted(vals, weights)
				if jsonKey(o.Type().Field(p)) == "100" {
					x = maxOf(vals)
				}
				o.Field(p).SetInt(int64(math.Floor(x) * hosts))
			}
		case reflect.Int64:
			for i, v := range vs {
				vals[i] = float64(v.Field(f).Int())
			}
			o.SetInt(int64(mergeNumber(key, vals, hostsEach, weights, hosts, requests, errs)))
		}
	}
	return out
}

// mergeNumber merges the values vals of the number of key k; see
// mergeHystrix.
func mergeNumber(k string, vals, hostsEach, weights []float64, hosts, requests, errs float64) float64 {
	switch {
	case k == "reportingHosts":
		return hosts
	case k == "errorPercentage":
		if requests == 0 {
			return 0
		}
		return math.Floor(100*errs/requests) * hosts
	case k == "currentTime":
		return maxOf(vals)
	case perHost[k]:
		for i := range vals {
			vals[i] /= hostsEach[i]
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

// stateRank orders breaker states from best to worst.
func stateRank(s string) int {
	switch s {
	case "open":
		return 2
	case "half-open":
		return 1
	}
	return 0
}

// native is what the native merge reads of an event: its breaker and its
// reportingHosts.
type native interface {
	*nativeCommand | *nativeGroup
	breakerOf() *breaker
	hosts() float64
}

func (e *nativeCommand) breakerOf() *breaker { return &e.breaker }
func (e *nativeGroup) breakerOf() *breaker   { return &e.breaker }
func (e *nativeCommand) hosts() float64      { return hostsOf(e.ReportingHosts) }
func (e *nativeGroup) hosts() float64        { return hostsOf(e.ReportingHosts) }

// worstOf returns the index of the event in the worst breaker state (open
// over half-open over closed; the first among equals), whose breaker
// fields the merged event takes, and the instances' weights: their
// healthRequests, or 1 each when none has any.
func worstOf[E native](evs []E) (worst int, weights []float64) {
	weights = make([]float64, len(evs))
	requests := 0.0
	for i, e := range evs {
		b := e.breakerOf()
		if stateRank(b.State) > stateRank(evs[worst].breakerOf().State) {
			worst = i
		}
		weights[i] = float64(b.HealthRequests)
		requests += weights[i]
	}
	if requests == 0 {
		for i := range weights {
			weights[i] = 1
		}
	}
	return worst, weights
}

// total returns the sum of f over evs.
func total[E any, N int | int64](evs []E, f func(E) N) N {
	var s N
	for _, e := range evs {
		s += f(e)
	}
	return s
}

// weightedBy returns the average of f over evs weighted by weights, as a
// ratio.
func weightedBy[E any](evs []E, weights []float64, f func(E) float64) float64 {
	vals := make([]float64, len(evs))
	for i, e := range evs {
		vals[i] = f(e)
	}
	return ratio(weighted(vals, weights))
}

// mergeBreakers sets the fleet figures of out, the breaker of the worst
// instance's copy, from evs: healthRequests summed, the ratios weighted by
// them; the rest stays the worst instance's.
func mergeBreakers[E native](out *breaker, evs []E, weights []float64) {
	out.HealthRequests = total(evs, func(e E) int64 { return e.breakerOf().HealthRequests })
	out.ErrorRatio = weightedBy(evs, weights, func(e E) float64 { return e.breakerOf().ErrorRatio })
	out.SlowRatio = weightedBy(evs, weights, func(e E) float64 { return e.breakerOf().SlowRatio })
}

// mergeNativeCommands merges the BulwarkCommand events of one key: the
// breaker fields (state, mode, reason, time in state, probes,
// transitions...) and the settings are those of the instance in the worst
// state, groupState the worst of all; counts and gauges are summed; ratios
// are averaged weighted by healthRequests; reportingHosts is added up.
func mergeNativeCommands(evs []*nativeCommand) *nativeCommand {
	worst, weights := worstOf(evs)
	out := *evs[worst]
	mergeBreakers(&out.breaker, evs, weights)
	for _, e := range evs {
		out.CurrentTime = max(out.CurrentTime, e.CurrentTime)
		if stateRank(e.GroupState) > stateRank(out.GroupState) {
			out.GroupState = e.GroupState
		}
	}
	out.InFlight = total(evs, func(e *nativeCommand) int64 { return e.InFlight })
	out.Detached = total(evs, func(e *nativeCommand) int64 { return e.Detached })
	out.DegradedRate = weightedBy(evs, weights, func(e *nativeCommand) float64 { return e.DegradedRate })
	out.RollingCountCancelled = total(evs, func(e *nativeCommand) int64 { return e.RollingCountCancelled })
	out.RollingCountSlow = total(evs, func(e *nativeCommand) int64 { return e.RollingCountSlow })
	out.RollingCountQueueTimeout = total(evs, func(e *nativeCommand) int64 { return e.RollingCountQueueTimeout })
	out.RollingCountProbe = total(evs, func(e *nativeCommand) int64 { return e.RollingCountProbe })
	out.RollingCountProbeSuccess = total(evs, func(e *nativeCommand) int64 { return e.RollingCountProbeSuccess })
	out.RollingCountProbeFailure = total(evs, func(e *nativeCommand) int64 { return e.RollingCountProbeFailure })
	out.RollingCountRateLimited = total(evs, func(e *nativeCommand) int64 { return e.RollingCountRateLimited })
	out.RollingCountThrottled = total(evs, func(e *nativeCommand) int64 { return e.RollingCountThrottled })
	out.RollingCountRetried = total(evs, func(e *nativeCommand) int64 { return e.RollingCountRetried })
	out.RollingCountReadOnly = total(evs, func(e *nativeCommand) int64 { return e.RollingCountReadOnly })
	out.RollingCountDegradedStatic = total(evs, func(e *nativeCommand) int64 { return e.RollingCountDegradedStatic })
	out.RollingCountDegradedLastGood = total(evs, func(e *nativeCommand) int64 { return e.RollingCountDegradedLastGood })
	out.RollingCountDegradedFeatureOff = total(evs, func(e *nativeCommand) int64 { return e.RollingCountDegradedFeatureOff })
	out.RollingCountDegradedDeferred = total(evs, func(e *nativeCommand) int64 { return e.RollingCountDegradedDeferred })
	out.RollingCountCoalesced = total(evs, func(e *nativeCommand) int64 { return e.RollingCountCoalesced })
	out.Coalescing = total(evs, func(e *nativeCommand) int64 { return e.Coalescing })
	out.RollingCountPriorityRejected = total(evs, func(e *nativeCommand) int64 { return e.RollingCountPriorityRejected })
	out.RollingCountHedged = total(evs, func(e *nativeCommand) int64 { return e.RollingCountHedged })
	out.ReportingHosts = int64(total(evs, func(e *nativeCommand) int { return int(e.hosts()) }))
	return &out
}

// mergeNativeGroups merges the BulwarkGroup events of one key as
// mergeNativeCommands does: the bulkhead's counts and gauges (capacity
// included: the fleet's) are summed, the rest is the worst instance's.
func mergeNativeGroups(evs []*nativeGroup) *nativeGroup {
	worst, weights := worstOf(evs)
	out := *evs[worst]
	mergeBreakers(&out.breaker, evs, weights)
	for _, e := range evs {
		out.CurrentTime = max(out.CurrentTime, e.CurrentTime)
	}
	out.Capacity = total(evs, func(e *nativeGroup) int { return e.Capacity })
	out.QueueCapacity = total(evs, func(e *nativeGroup) int { return e.QueueCapacity })
	out.Active = total(evs, func(e *nativeGroup) int { return e.Active })
	out.Queued = total(evs, func(e *nativeGroup) int { return e.Queued })
	out.Detached = total(evs, func(e *nativeGroup) int { return e.Detached })
	out.LargestActive = total(evs, func(e *nativeGroup) int { return e.LargestActive })
	out.Completed = total(evs, func(e *nativeGroup) int64 { return e.Completed })
	out.Rejected = total(evs, func(e *nativeGroup) int64 { return e.Rejected })
	out.RollingRejected = total(evs, func(e *nativeGroup) int64 { return e.RollingRejected })
	out.RollingExecuted = total(evs, func(e *nativeGroup) int64 { return e.RollingExecuted })
	out.ReportingHosts = int64(total(evs, func(e *nativeGroup) int { return int(e.hosts()) }))
	return &out
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
