package dashboard

import (
	"math"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// transition is one breaker transition on the native events.
type transition struct {
	From           string  `json:"from"`
	To             string  `json:"to"`
	Reason         string  `json:"reason"`
	At             int64   `json:"at"` // epoch ms
	Requests       int64   `json:"requests"`
	ErrorRatio     float64 `json:"errorRatio"`
	SlowRatio      float64 `json:"slowRatio"`
	OpenDurationMs int64   `json:"openDurationMs"`
}

// breaker is a breaker's state on the native events (flattened into them).
type breaker struct {
	State          string       `json:"state"`  // "closed", "open", "half-open" (effective)
	Mode           string       `json:"mode"`   // "normal", "forced-open", "forced-closed", "observe-only"
	Reason         string       `json:"reason"` // of the last transition; "" if none
	TimeInStateMs  int64        `json:"timeInStateMs"`
	OpenDurationMs int64        `json:"openDurationMs"` // current, backed-off open duration
	RetryAfterMs   int64        `json:"retryAfterMs"`   // open: time left before half-open
	Probes         int          `json:"probes"`         // half-open: probes in flight
	ProbeSuccesses int          `json:"probeSuccesses"` // half-open: consecutive successes
	ProbesNeeded   int          `json:"probesNeeded"`   // successes that close it
	RampShare      float64      `json:"rampShare"`      // share admitted now; 1 when not ramping
	HealthRequests int64        `json:"healthRequests"` // SUCCESS+FAILURE+TIMEOUT in the window
	ErrorRatio     float64      `json:"errorRatio"`     // (FAILURE+TIMEOUT) / HealthRequests
	SlowRatio      float64      `json:"slowRatio"`      // SLOW / HealthRequests
	Transitions    []transition `json:"transitions"`    // the last few, oldest first
	Shared         string       `json:"shared"`         // shared-state status ("shared state: degraded (…)"); "" when alone
	policies
}

// policies are a breaker's operating policies on the native events
// (flattened into them).
type policies struct {
	WarmingUp     bool   `json:"warmingUp"`     // outcomes not counted now (warm-up)
	WarmUpLeftMs  int64  `json:"warmUpLeftMs"`  // time left in the warm-up
	ProbeFailures int    `json:"probeFailures"` // half-open: consecutive failed probes
	HealthCheck   string `json:"healthCheck"`   // the health checker's progress line (circuit.Snapshot.HealthCheck); "" without one
	// The confidence rule (circuit.Config.Confidence; 0: off) and the
	// ratios' lower bounds at it, which the breaker compares with its
	// thresholds (the ratios themselves with the rule off).
	Confidence float64 `json:"confidence"`
	ErrorBound float64 `json:"errorBound"`
	SlowBound  float64 `json:"slowBound"`
}

func (p *policies) fill(s *circuit.Snapshot) {
	*p = policies{
		WarmingUp:     s.WarmUpLeft > 0,
		WarmUpLeftMs:  ms(s.WarmUpLeft),
		ProbeFailures: s.ProbeFailures,
		HealthCheck:   s.HealthCheck,
		Confidence:    ratio(s.Config.Confidence),
		ErrorBound:    ratio(s.Health.ErrorBound),
		SlowBound:     ratio(s.Health.SlowBound),
	}
}

// lastReason returns the reason of s's last transition; "" if none.
func lastReason(s *circuit.Snapshot) string {
	if n := len(s.Transitions); n > 0 {
		return string(s.Transitions[n-1].Reason)
	}
	return ""
}

// fill sets b from s, placing transitions in wall time: the snapshot was
// taken at epoch-ms now, s.Since after the newest transition.
func (b *breaker) fill(now int64, s *circuit.Snapshot) {
	ts := b.Transitions[:0]
	if ts == nil {
		ts = make([]transition, 0, len(s.Transitions)) // [] on the wire, never null
	}
	if n := len(s.Transitions); n > 0 {
		clock := s.Transitions[n-1].At + s.Since // the breaker's clock at the snapshot
		for _, t := range s.Transitions {
			ts = append(ts, transition{
				From:           t.From.String(),
				To:             t.To.String(),
				Reason:         string(t.Reason),
				At:             now - ms(clock-t.At),
				Requests:       t.Health.Requests,
				ErrorRatio:     ratio(t.Health.ErrorRatio),
				SlowRatio:      ratio(t.Health.SlowRatio),
				OpenDurationMs: ms(t.OpenDuration),
			})
		}
	}
	*b = breaker{
		State:          s.State.String(),
		Mode:           s.Mode.String(),
		Reason:         lastReason(s),
		TimeInStateMs:  ms(s.Since),
		OpenDurationMs: ms(s.OpenDuration),
		RetryAfterMs:   ms(s.RetryAfter),
		Probes:         s.Probes,
		ProbeSuccesses: s.ProbeSuccesses,
		ProbesNeeded:   s.Config.HalfOpenSuccesses,
		RampShare:      ratio(s.RampShare),
		HealthRequests: s.Health.Requests,
		ErrorRatio:     ratio(s.Health.ErrorRatio),
		SlowRatio:      ratio(s.Health.SlowRatio),
		Transitions:    ts,
		Shared:         s.Shared,
	}
	b.policies.fill(s)
}

// bulwarkCommand is the BulwarkCommand event: what the Hystrix event cannot
// say about a command. Its breaker fields are the command's own breaker;
// groupState and groupMode tell whether the group's breaker refuses too.
type bulwarkCommand struct {
	Type        string `json:"type"`
	Name        string `json:"name"`
	Group       string `json:"group"`
	CurrentTime int64  `json:"currentTime"`
	breaker
	GroupState            string  `json:"groupState"`
	GroupMode             string  `json:"groupMode"`
	InFlight              int64   `json:"inFlight"`
	Detached              int64   `json:"detached"`     // timed out, still running in the pool
	DegradedRate          float64 `json:"degradedRate"` // FALLBACK_SUCCESS / calls in the window
	RollingCountCancelled int64   `json:"rollingCountCancelled"`
	RollingCountSlow      int64   `json:"rollingCountSlow"`
	// RollingCountQueueTimeout counts calls that timed out in the pool's
	// queue (QUEUE_TIMEOUT), also counted as rejected in the Hystrix event.
	RollingCountQueueTimeout int64 `json:"rollingCountQueueTimeout"`
	TimeoutMs                int64 `json:"timeoutMs"` // 0: no timeout
	SlowCallDurationMs       int64 `json:"slowCallDurationMs"`
	// Half-open probes in the window: admitted (PROBE), and judged a
	// success or a failure (PROBE_SUCCESS, PROBE_FAILURE).
	RollingCountProbe        int64 `json:"rollingCountProbe"`
	RollingCountProbeSuccess int64 `json:"rollingCountProbeSuccess"`
	RollingCountProbeFailure int64 `json:"rollingCountProbeFailure"`
	// AlertTier is the alert tier the command's breaker has reached ("" for
	// none); DegradedAlarm tells that its degraded alarm is raised (see
	// package alert).
	AlertTier     string `json:"alertTier"`
	DegradedAlarm bool   `json:"degradedAlarm"`
	// RollingCountRateLimited counts calls a rate limiter refused
	// (RATE_LIMITED), also counted as semaphore rejections in the Hystrix
	// event.
	RollingCountRateLimited int64 `json:"rollingCountRateLimited"`
	// RollingCountRetried counts attempts that failed and were retried
	// (RETRIED, see retry.Config); each is also counted with its
	// own outcome (FAILURE or TIMEOUT). The Hystrix event has no key for it.
	RollingCountRetried int64 `json:"rollingCountRetried"`
	// RollingCountReadOnly counts writes that read-only mode refused
	// (READ_ONLY, see command.GroupConfig.ReadOnly). The Hystrix event has
	// no key for it.
	RollingCountReadOnly int64 `json:"rollingCountReadOnly"`
	// The fallback successes by kind of degradation (DEGRADED_STATIC,
	// DEGRADED_LAST_GOOD, DEGRADED_FEATURE_OFF, DEGRADED_DEFERRED, see
	// fallback.Degrader); the rest of rollingCountFallbackSuccess
	// declared no kind.
	RollingCountDegradedStatic     int64 `json:"rollingCountDegradedStatic"`
	RollingCountDegradedLastGood   int64 `json:"rollingCountDegradedLastGood"`
	RollingCountDegradedFeatureOff int64 `json:"rollingCountDegradedFeatureOff"`
	RollingCountDegradedDeferred   int64 `json:"rollingCountDegradedDeferred"`
	// RollingCountCoalesced counts calls that shared another call's Run
	// (COALESCED, see command.CommandConfig.Coalesce), also in the Hystrix
	// event's rollingCountCollapsedRequests.
	RollingCountCoalesced int64 `json:"rollingCountCoalesced"`
	// Coalescing is the number of calls waiting now for a Run another
	// call started (command.CommandSnapshot.Coalescing).
	Coalescing int64 `json:"coalescing"`
	// RollingCountThrottled counts calls the group's client-side throttle
	// refused (THROTTLED, see throttle.Config), also counted as
	// semaphore rejections in the Hystrix event.
	RollingCountThrottled int64 `json:"rollingCountThrottled"`
	// RollingCountPriorityRejected counts calls that priority shedding
	// refused (PRIORITY_REJECTED, see priority.Config), also counted
	// as semaphore rejections in the Hystrix event.
	RollingCountPriorityRejected int64 `json:"rollingCountPriorityRejected"`
	// RollingCountHedged counts the attempts of hedged calls whose answer
	// the caller did not take (HEDGED, see package command/hedge): the extra
	// load hedging put on the dependency. Each is also counted with its
	// own outcome.
	RollingCountHedged int64 `json:"rollingCountHedged"`
}

func (e *bulwarkCommand) fill(now int64, g *command.GroupSnapshot, c *command.CommandSnapshot) {
	e.Type = TypeBulwarkCommand
	e.Name = c.Name
	e.Group = g.Name
	e.CurrentTime = now
	e.breaker.fill(now, &c.Breaker)
	e.GroupState = g.Breaker.State.String()
	e.GroupMode = g.Breaker.Mode.String()
	e.InFlight = c.InFlight
	e.Detached = c.Detached
	e.DegradedRate = ratio(c.Metrics.Counts.DegradedRate())
	e.RollingCountCancelled = c.Metrics.Counts[metrics.Cancelled]
	e.RollingCountSlow = c.Metrics.Counts[metrics.Slow]
	e.RollingCountQueueTimeout = c.Metrics.Counts[metrics.QueueTimeout]
	e.TimeoutMs = timeoutMs(c.Timeout)
	e.SlowCallDurationMs = ms(c.Breaker.Config.SlowCallDuration)
	e.RollingCountProbe = c.Metrics.Counts[metrics.Probe]
	e.RollingCountProbeSuccess = c.Metrics.Counts[metrics.ProbeSuccess]
	e.RollingCountProbeFailure = c.Metrics.Counts[metrics.ProbeFailure]
	e.AlertTier = c.AlertTier
	e.DegradedAlarm = c.DegradedAlarm
	e.RollingCountRateLimited = c.Metrics.Counts[metrics.RateLimited]
	e.RollingCountRetried = c.Metrics.Counts[metrics.Retried]
	e.RollingCountReadOnly = c.Metrics.Counts[metrics.ReadOnly]
	e.RollingCountDegradedStatic = c.Metrics.Counts[metrics.DegradedStatic]
	e.RollingCountDegradedLastGood = c.Metrics.Counts[metrics.DegradedLastGood]
	e.RollingCountDegradedFeatureOff = c.Metrics.Counts[metrics.DegradedFeatureOff]
	e.RollingCountDegradedDeferred = c.Metrics.Counts[metrics.DegradedDeferred]
	e.RollingCountCoalesced = c.Metrics.Counts[metrics.Coalesced]
	e.Coalescing = c.Coalescing
	e.RollingCountThrottled = c.Metrics.Counts[metrics.Throttled]
	e.RollingCountPriorityRejected = c.Metrics.Counts[metrics.PriorityRejected]
	e.RollingCountHedged = c.Metrics.Counts[metrics.Hedged]
}

// bulwarkGroup is the BulwarkGroup event: a group's bulkhead (pool or
// semaphore alike) and its group-level breaker.
type bulwarkGroup struct {
	Type            string `json:"type"`
	Name            string `json:"name"`
	CurrentTime     int64  `json:"currentTime"`
	Strategy        string `json:"strategy"` // "THREAD" or "SEMAPHORE"
	Capacity        int    `json:"capacity"`
	QueueCapacity   int    `json:"queueCapacity"`
	Active          int    `json:"active"`
	Queued          int    `json:"queued"`
	Detached        int    `json:"detached"` // timed out, still running in the pool
	LargestActive   int    `json:"largestActive"`
	Completed       int64  `json:"completed"` // since start
	Rejected        int64  `json:"rejected"`  // since start
	RollingRejected int64  `json:"rollingRejected"`
	RollingExecuted int64  `json:"rollingExecuted"`
	WindowMs        int64  `json:"windowMs"`
	TimeoutMs       int64  `json:"timeoutMs"` // 0: no timeout
	FallbackLimit   int    `json:"fallbackLimit"`
	breaker
	AlertTier string `json:"alertTier"` // the group breaker's alert tier; "" for none

	ConfigGeneration uint64 `json:"configGeneration"` // accepted Reconfigure calls
	ConfigAgeMs      int64  `json:"configAgeMs"`      // since the last one (or creation)

	// The client-side throttle (throttle.Config; throttleK 0: off):
	// its window's requests and accepts, and the share it refuses now.
	ThrottleK           float64 `json:"throttleK"`
	ThrottleRequests    int64   `json:"throttleRequests"`
	ThrottleAccepts     int64   `json:"throttleAccepts"`
	ThrottleProbability float64 `json:"throttleProbability"`

	// The adaptive concurrency limit (adaptive.Config; adaptiveLimit
	// 0: off): the limit in force (capacity too) and the no-load and last
	// window's latencies it follows, in ms.
	AdaptiveLimit     int     `json:"adaptiveLimit"`
	AdaptiveNoLoadMs  float64 `json:"adaptiveNoLoadMs"`
	AdaptiveLatencyMs float64 `json:"adaptiveLatencyMs"`
}

func (e *bulwarkGroup) fill(now int64, g *command.GroupSnapshot) {
	b := &g.Bulkhead
	counts := &g.Metrics.Counts
	e.Type = TypeBulwarkGroup
	e.Name = g.Name
	e.CurrentTime = now
	e.Strategy = g.Config.Strategy.String()
	e.Capacity = b.Capacity
	e.QueueCapacity = b.QueueCapacity
	e.Active = b.Active
	e.Queued = b.Queued
	e.Detached = b.Detached
	e.LargestActive = b.LargestActive
	e.Completed = b.Completed
	e.Rejected = b.Rejected
	e.RollingRejected = counts[metrics.ThreadPoolRejected] + counts[metrics.SemaphoreRejected]
	e.RollingExecuted = executed(counts)
	e.WindowMs = ms(g.Metrics.Window.Length)
	e.TimeoutMs = timeoutMs(g.Config.Timeout)
	e.FallbackLimit = g.Config.FallbackLimit
	e.breaker.fill(now, &g.Breaker)
	e.AlertTier = g.AlertTier
	e.ConfigGeneration = g.ConfigGeneration
	e.ConfigAgeMs = ms(g.ConfigAge)
	e.ThrottleK = finite(g.Throttle.K)
	e.ThrottleRequests = g.Throttle.Requests
	e.ThrottleAccepts = g.Throttle.Accepts
	e.ThrottleProbability = ratio(g.Throttle.Probability)
	e.AdaptiveLimit = g.Adaptive.Limit
	e.AdaptiveNoLoadMs = fracMs(g.Adaptive.NoLoad)
	e.AdaptiveLatencyMs = fracMs(g.Adaptive.Latency)
}

// fracMs is d in ms with three decimals (µs): a latency of a few ms keeps
// its figures.
func fracMs(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// timeoutMs is a timeout in ms; a timeout that is off reads 0.
func timeoutMs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return ms(d)
}

// ratio keeps a ratio short on the wire (four decimals) and finite.
func ratio(x float64) float64 {
	return math.Round(finite(x)*1e4) / 1e4
}
