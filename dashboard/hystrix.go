package dashboard

import (
	"math"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// Event types on the stream. The first two are Hystrix's; tools built for
// Hystrix ignore the other two.
const (
	TypeHystrixCommand    = "HystrixCommand"
	TypeHystrixThreadPool = "HystrixThreadPool"
	TypeBulwarkCommand    = "BulwarkCommand"
	TypeBulwarkGroup      = "BulwarkGroup"
)

// percentiles is Hystrix's latency object: percentile → milliseconds.
type percentiles struct {
	P0   int64 `json:"0"`
	P25  int64 `json:"25"`
	P50  int64 `json:"50"`
	P75  int64 `json:"75"`
	P90  int64 `json:"90"`
	P95  int64 `json:"95"`
	P99  int64 `json:"99"`
	P995 int64 `json:"99.5"`
	P100 int64 `json:"100"`
}

func percentilesOf(l metrics.Latency) percentiles {
	p := l.Percentiles // index i is metrics.Quantiles[i]
	return percentiles{
		P0: ms(p[0]), P25: ms(p[1]), P50: ms(p[2]), P75: ms(p[3]), P90: ms(p[4]),
		P95: ms(p[5]), P99: ms(p[6]), P995: ms(p[7]), P100: ms(p[8]),
	}
}

// hystrixCommand is the HystrixCommand event: the 48 keys of Hystrix 1.5, in
// its order. Typed fields keep every key present with its JSON type.
type hystrixCommand struct {
	Type                 string `json:"type"`
	Name                 string `json:"name"`
	Group                string `json:"group"`
	CurrentTime          int64  `json:"currentTime"`
	IsCircuitBreakerOpen bool   `json:"isCircuitBreakerOpen"`
	ErrorPercentage      int64  `json:"errorPercentage"`
	ErrorCount           int64  `json:"errorCount"`
	RequestCount         int64  `json:"requestCount"`

	RollingCountBadRequests        int64 `json:"rollingCountBadRequests"`
	RollingCountCollapsedRequests  int64 `json:"rollingCountCollapsedRequests"`
	RollingCountEmit               int64 `json:"rollingCountEmit"`
	RollingCountExceptionsThrown   int64 `json:"rollingCountExceptionsThrown"`
	RollingCountFailure            int64 `json:"rollingCountFailure"`
	RollingCountFallbackEmit       int64 `json:"rollingCountFallbackEmit"`
	RollingCountFallbackFailure    int64 `json:"rollingCountFallbackFailure"`
	RollingCountFallbackMissing    int64 `json:"rollingCountFallbackMissing"`
	RollingCountFallbackRejection  int64 `json:"rollingCountFallbackRejection"`
	RollingCountFallbackSuccess    int64 `json:"rollingCountFallbackSuccess"`
	RollingCountResponsesFromCache int64 `json:"rollingCountResponsesFromCache"`
	RollingCountSemaphoreRejected  int64 `json:"rollingCountSemaphoreRejected"`
	RollingCountShortCircuited     int64 `json:"rollingCountShortCircuited"`
	RollingCountSuccess            int64 `json:"rollingCountSuccess"`
	RollingCountThreadPoolRejected int64 `json:"rollingCountThreadPoolRejected"`
	RollingCountTimeout            int64 `json:"rollingCountTimeout"`

	CurrentConcurrentExecutionCount    int64 `json:"currentConcurrentExecutionCount"`
	RollingMaxConcurrentExecutionCount int64 `json:"rollingMaxConcurrentExecutionCount"`

	LatencyExecuteMean int64       `json:"latencyExecute_mean"`
	LatencyExecute     percentiles `json:"latencyExecute"`
	LatencyTotalMean   int64       `json:"latencyTotal_mean"`
	LatencyTotal       percentiles `json:"latencyTotal"`

	CircuitBreakerRequestVolumeThreshold       int64   `json:"propertyValue_circuitBreakerRequestVolumeThreshold"`
	CircuitBreakerSleepWindowInMilliseconds    int64   `json:"propertyValue_circuitBreakerSleepWindowInMilliseconds"`
	CircuitBreakerErrorThresholdPercentage     int64   `json:"propertyValue_circuitBreakerErrorThresholdPercentage"`
	CircuitBreakerForceOpen                    bool    `json:"propertyValue_circuitBreakerForceOpen"`
	CircuitBreakerForceClosed                  bool    `json:"propertyValue_circuitBreakerForceClosed"`
	CircuitBreakerEnabled                      bool    `json:"propertyValue_circuitBreakerEnabled"`
	ExecutionIsolationStrategy                 string  `json:"propertyValue_executionIsolationStrategy"`
	ExecutionIsolationThreadTimeoutInMillis    int64   `json:"propertyValue_executionIsolationThreadTimeoutInMilliseconds"`
	ExecutionTimeoutInMilliseconds             int64   `json:"propertyValue_executionTimeoutInMilliseconds"`
	ExecutionIsolationThreadInterruptOnTimeout bool    `json:"propertyValue_executionIsolationThreadInterruptOnTimeout"`
	ExecutionIsolationThreadPoolKeyOverride    *string `json:"propertyValue_executionIsolationThreadPoolKeyOverride"`
	ExecutionIsolationSemaphoreMaxConcurrent   int64   `json:"propertyValue_executionIsolationSemaphoreMaxConcurrentRequests"`
	FallbackIsolationSemaphoreMaxConcurrent    int64   `json:"propertyValue_fallbackIsolationSemaphoreMaxConcurrentRequests"`
	MetricsRollingStatisticalWindowInMillis    int64   `json:"propertyValue_metricsRollingStatisticalWindowInMilliseconds"`
	RequestCacheEnabled                        bool    `json:"propertyValue_requestCacheEnabled"`
	RequestLogEnabled                          bool    `json:"propertyValue_requestLogEnabled"`

	ReportingHosts int64  `json:"reportingHosts"`
	ThreadPool     string `json:"threadPool"`
}

// fill sets every key of e from command c of group g at epoch-ms now.
func (e *hystrixCommand) fill(now int64, g *command.GroupSnapshot, c *command.CommandSnapshot) {
	counts := &c.Metrics.Counts
	health := c.Breaker.Health
	*e = hystrixCommand{
		Type:                 TypeHystrixCommand,
		Name:                 c.Name,
		Group:                g.Name,
		CurrentTime:          now,
		IsCircuitBreakerOpen: refusing(c.Breaker) || refusing(g.Breaker),
		ErrorPercentage:      int64(finite(health.ErrorRatio) * 100),
		ErrorCount:           health.Failures + health.Timeouts,
		RequestCount:         health.Requests,

		RollingCountBadRequests:        counts[metrics.BadRequest],
		RollingCountCollapsedRequests:  counts[metrics.Coalesced],
		RollingCountExceptionsThrown:   counts[metrics.ExceptionThrown],
		RollingCountFailure:            counts[metrics.Failure],
		RollingCountFallbackFailure:    counts[metrics.FallbackFailure],
		RollingCountFallbackMissing:    counts[metrics.FallbackMissing],
		RollingCountFallbackRejection:  counts[metrics.FallbackRejection],
		RollingCountFallbackSuccess:    counts[metrics.FallbackSuccess],
		RollingCountSemaphoreRejected:  counts[metrics.SemaphoreRejected] + counts[metrics.RateLimited] + counts[metrics.Throttled] + counts[metrics.PriorityRejected],
		RollingCountShortCircuited:     counts[metrics.ShortCircuited],
		RollingCountSuccess:            counts[metrics.Success],
		RollingCountThreadPoolRejected: counts[metrics.ThreadPoolRejected] + counts[metrics.QueueTimeout],
		RollingCountTimeout:            counts[metrics.Timeout],

		CurrentConcurrentExecutionCount:    c.InFlight,
		RollingMaxConcurrentExecutionCount: c.Metrics.Max, // the command's peak in flight in the window

		LatencyExecuteMean: ms(c.Metrics.Run.Mean),
		LatencyExecute:     percentilesOf(c.Metrics.Run),
		LatencyTotalMean:   ms(c.Metrics.Total.Mean),
		LatencyTotal:       percentilesOf(c.Metrics.Total),

		CircuitBreakerRequestVolumeThreshold:       int64(c.Breaker.Config.MinRequests),
		CircuitBreakerSleepWindowInMilliseconds:    ms(c.Breaker.OpenDuration),
		CircuitBreakerErrorThresholdPercentage:     int64(math.Round(finite(c.Breaker.Config.FailureRatio) * 100)),
		CircuitBreakerForceOpen:                    c.Breaker.Mode == circuit.ForcedOpen,
		CircuitBreakerForceClosed:                  c.Breaker.Mode == circuit.ForcedClosed,
		CircuitBreakerEnabled:                      c.Breaker.Mode != circuit.ObserveOnly,
		ExecutionIsolationStrategy:                 g.Config.Strategy.String(),
		ExecutionIsolationThreadTimeoutInMillis:    timeoutMs(c.Timeout),
		ExecutionTimeoutInMilliseconds:             timeoutMs(c.Timeout),
		ExecutionIsolationThreadInterruptOnTimeout: true,
		ExecutionIsolationSemaphoreMaxConcurrent:   int64(g.Bulkhead.Capacity),
		FallbackIsolationSemaphoreMaxConcurrent:    int64(g.Config.FallbackLimit),
		MetricsRollingStatisticalWindowInMillis:    ms(c.Metrics.Window.Length),

		ReportingHosts: 1,
		ThreadPool:     g.Name,
	}
}

// hystrixThreadPool is the HystrixThreadPool event: the 17 keys of Hystrix
// 1.5, for a group isolated by a goroutine pool.
type hystrixThreadPool struct {
	Type                          string `json:"type"`
	Name                          string `json:"name"`
	CurrentTime                   int64  `json:"currentTime"`
	CurrentActiveCount            int64  `json:"currentActiveCount"`
	CurrentCompletedTaskCount     int64  `json:"currentCompletedTaskCount"`
	CurrentCorePoolSize           int64  `json:"currentCorePoolSize"`
	CurrentLargestPoolSize        int64  `json:"currentLargestPoolSize"`
	CurrentMaximumPoolSize        int64  `json:"currentMaximumPoolSize"`
	CurrentPoolSize               int64  `json:"currentPoolSize"`
	CurrentQueueSize              int64  `json:"currentQueueSize"`
	CurrentTaskCount              int64  `json:"currentTaskCount"`
	RollingCountThreadsExecuted   int64  `json:"rollingCountThreadsExecuted"`
	RollingMaxActiveThreads       int64  `json:"rollingMaxActiveThreads"`
	RollingCountCommandRejections int64  `json:"rollingCountCommandRejections"`
	QueueSizeRejectionThreshold   int64  `json:"propertyValue_queueSizeRejectionThreshold"`
	MetricsRollingWindowInMillis  int64  `json:"propertyValue_metricsRollingStatisticalWindowInMilliseconds"`
	ReportingHosts                int64  `json:"reportingHosts"`
}

// fill sets every key of e from pool group g at epoch-ms now.
func (e *hystrixThreadPool) fill(now int64, g *command.GroupSnapshot) {
	b := &g.Bulkhead
	counts := &g.Metrics.Counts
	*e = hystrixThreadPool{
		Type:                          TypeHystrixThreadPool,
		Name:                          g.Name,
		CurrentTime:                   now,
		CurrentActiveCount:            int64(b.Active),
		CurrentCompletedTaskCount:     b.Completed,
		CurrentCorePoolSize:           int64(b.Capacity),
		CurrentLargestPoolSize:        int64(b.LargestActive),
		CurrentMaximumPoolSize:        int64(b.Capacity),
		CurrentPoolSize:               int64(b.Capacity),
		CurrentQueueSize:              int64(b.Queued),
		CurrentTaskCount:              b.Completed + int64(b.Active) + int64(b.Queued),
		RollingCountThreadsExecuted:   executed(counts),
		RollingMaxActiveThreads:       g.Metrics.Max,
		RollingCountCommandRejections: counts[metrics.ThreadPoolRejected] + counts[metrics.QueueTimeout],
		QueueSizeRejectionThreshold:   int64(b.QueueCapacity),
		MetricsRollingWindowInMillis:  ms(g.Metrics.Window.Length),
		ReportingHosts:                1,
	}
}

// isPool reports whether g is isolated by a goroutine pool (Hystrix's thread
// pool), the groups that get a HystrixThreadPool event.
func isPool(g *command.GroupSnapshot) bool {
	return g.Config.Strategy == command.Thread
}

// executed counts the calls in the window that ran in the bulkhead.
func executed(c *metrics.Counts) int64 {
	return c[metrics.Success] + c[metrics.Failure] + c[metrics.Timeout] + c[metrics.BadRequest]
}

// refusing reports whether a breaker refuses calls now: open, half-open (it
// admits only its probes) or forced open. In observe-only mode it never
// refuses, whatever state it computes.
func refusing(b circuit.Snapshot) bool {
	return b.Mode != circuit.ObserveOnly && b.State != circuit.Closed
}

// ms converts d to whole milliseconds, truncating like Hystrix.
func ms(d time.Duration) int64 { return d.Milliseconds() }

// finite maps NaN and infinities, which JSON cannot carry, to 0.
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}
