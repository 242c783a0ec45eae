package dashboard

import (
	"encoding/json"
	"strconv"
)

// JSON kinds of the hystrix.stream keys.
const (
	kString       = "string"
	kInt          = "int"
	kBool         = "bool"
	kPercentiles  = "percentiles"
	kStringOrNull = "string|null"
)

// hystrixCommandKeys is the HystrixCommand event of the wire format
// reference (shared/hystrix-stream.md): all 48 keys and their JSON kinds.
var hystrixCommandKeys = map[string]string{
	"type":                               kString,
	"name":                               kString,
	"group":                              kString,
	"currentTime":                        kInt,
	"isCircuitBreakerOpen":               kBool,
	"errorPercentage":                    kInt,
	"errorCount":                         kInt,
	"requestCount":                       kInt,
	"rollingCountBadRequests":            kInt,
	"rollingCountCollapsedRequests":      kInt,
	"rollingCountEmit":                   kInt,
	"rollingCountExceptionsThrown":       kInt,
	"rollingCountFailure":                kInt,
	"rollingCountFallbackEmit":           kInt,
	"rollingCountFallbackFailure":        kInt,
	"rollingCountFallbackMissing":        kInt,
	"rollingCountFallbackRejection":      kInt,
	"rollingCountFallbackSuccess":        kInt,
	"rollingCountResponsesFromCache":     kInt,
	"rollingCountSemaphoreRejected":      kInt,
	"rollingCountShortCircuited":         kInt,
	"rollingCountSuccess":                kInt,
	"rollingCountThreadPoolRejected":     kInt,
	"rollingCountTimeout":                kInt,
	"currentConcurrentExecutionCount":    kInt,
	"rollingMaxConcurrentExecutionCount": kInt,
	"latencyExecute_mean":                kInt,
	"latencyExecute":                     kPercentiles,
	"latencyTotal_mean":                  kInt,
	"latencyTotal":                       kPercentiles,
	"propertyValue_circuitBreakerRequestVolumeThreshold":             kInt,
	"propertyValue_circuitBreakerSleepWindowInMilliseconds":          kInt,
	"propertyValue_circuitBreakerErrorThresholdPercentage":           kInt,
	"propertyValue_circuitBreakerForceOpen":                          kBool,
	"propertyValue_circuitBreakerForceClosed":                        kBool,
	"propertyValue_circuitBreakerEnabled":                            kBool,
	"propertyValue_executionIsolationStrategy":                       kString,
	"propertyValue_executionIsolationThreadTimeoutInMilliseconds":    kInt,
	"propertyValue_executionTimeoutInMilliseconds":                   kInt,
	"propertyValue_executionIsolationThreadInterruptOnTimeout":       kBool,
	"propertyValue_executionIsolationThreadPoolKeyOverride":          kStringOrNull,
	"propertyValue_executionIsolationSemaphoreMaxConcurrentRequests": kInt,
	"propertyValue_fallbackIsolationSemaphoreMaxConcurrentRequests":  kInt,
	"propertyValue_metricsRollingStatisticalWindowInMilliseconds":    kInt,
	"propertyValue_requestCacheEnabled":                              kBool,
	"propertyValue_requestLogEnabled":                                kBool,
	"reportingHosts":                                                 kInt,
	"threadPool":                                                     kString,
}

// hystrixThreadPoolKeys is the HystrixThreadPool event: all 17 keys.
var hystrixThreadPoolKeys = map[string]string{
	"type":                                      kString,
	"name":                                      kString,
	"currentTime":                               kInt,
	"currentActiveCount":                        kInt,
	"currentCorePoolSize":                       kInt,
	"currentLargestPoolSize":                    kInt,
	"currentMaximumPoolSize":                    kInt,
	"currentPoolSize":                           kInt,
	"currentQueueSize":                          kInt,
	"currentCompletedTaskCount":                 kInt,
	"currentTaskCount":                          kInt,
	"rollingCountThreadsExecuted":               kInt,
	"rollingMaxActiveThreads":                   kInt,
	"rollingCountCommandRejections":             kInt,
	"propertyValue_queueSizeRejectionThreshold": kInt,
	"propertyValue_metricsRollingStatisticalWindowInMilliseconds": kInt,
	"reportingHosts": kInt,
}

// percentileKeys are the keys of a latency object.
var percentileKeys = []string{"0", "25", "50", "75", "90", "95", "99", "99.5", "100"}

// isInt reports whether v (decoded with UseNumber) is a JSON integer.
func isInt(v any) bool {
	n, ok := v.(json.Number)
	if !ok {
		return false
	}
	_, err := strconv.ParseInt(string(n), 10, 64)
	return err == nil
}

// kindOK reports whether v has the JSON kind k.
func kindOK(k string, v any) bool {
	switch k {
	case kString:
		_, ok := v.(string)
		return ok
	case kInt:
		return isInt(v)
	case kBool:
		_, ok := v.(bool)
		return ok
	case kStringOrNull:
		_, ok := v.(string)
		return ok || v == nil
	case kPercentiles:
		m, ok := v.(map[string]any)
		if !ok || len(m) != len(percentileKeys) {
			return false
		}
		for _, p := range percentileKeys {
			if !isInt(m[p]) {
				return false
			}
		}
		return true
	}
	return false
}

// num returns the integer value of a decoded JSON number (0 if it is not).
func num(v any) int64 {
	n, _ := v.(json.Number)
	i, _ := strconv.ParseInt(string(n), 10, 64)
	return i
}

// flt returns the value of a decoded JSON number as a float.
func flt(v any) float64 {
	n, _ := v.(json.Number)
	f, _ := strconv.ParseFloat(string(n), 64)
	return f
}
