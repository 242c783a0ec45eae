package metrics

import (
	"math/bits"
	"strings"
)

// Event is one kind of thing that can happen to a command call. The names
// follow Hystrix so the stream stays compatible with its tooling; Cancelled,
// Slow, QueueTimeout, the Probe events, RateLimited, Retried, ReadOnly, the
// Degraded events, Coalesced, Throttled, PriorityRejected and Hedged are
// bulwark's own.
type Event uint8

// The events counted in every bucket. A call has exactly one primary outcome
// (Success, Failure, Timeout, BadRequest, ShortCircuited, ThreadPoolRejected,
// SemaphoreRejected, Cancelled, QueueTimeout, RateLimited, ReadOnly,
// Coalesced, Throttled or PriorityRejected); the others are recorded
// alongside it.
const (
	Success            Event = iota // Run returned without error
	Failure                         // Run returned an error or panicked
	Timeout                         // Run did not finish before the deadline
	BadRequest                      // the caller's fault; not counted against health
	ShortCircuited                  // a breaker refused the call
	ThreadPoolRejected              // the pool and its queue were full
	SemaphoreRejected               // the semaphore was full
	FallbackSuccess                 // a fallback served a value
	FallbackFailure                 // the fallback returned an error
	FallbackRejection               // the fallback limiter was full
	FallbackMissing                 // the command has no fallback
	ExceptionThrown                 // the caller got an error
	Cancelled                       // the caller's context ended first
	Slow                            // a success slower than the slow-call threshold
	QueueTimeout                    // the timeout ended the call while it waited for a worker; Run never started
	Probe                           // the call was a half-open probe of a breaker (recorded alongside the primary outcome)
	ProbeSuccess                    // a probe judged a success (see command.GroupConfig.ProbeClassifier)
	ProbeFailure                    // a probe judged a failure or timeout
	RateLimited                     // a rate limiter refused the call; Run never started
	Retried                         // the attempt failed and is being retried (recorded alongside its FAILURE or TIMEOUT)
	ReadOnly                        // read-only mode refused a write; Run never started
	DegradedStatic                  // the fallback served a static default (beside FALLBACK_SUCCESS)
	DegradedLastGood                // the fallback served the last good value (beside FALLBACK_SUCCESS)
	DegradedFeatureOff              // the fallback turned the feature off: an empty answer (beside FALLBACK_SUCCESS)
	DegradedDeferred                // the fallback deferred the work for later (beside FALLBACK_SUCCESS)
	Coalesced                       // the call shared another call's Run (request coalescing); it did not run its own
	Throttled                       // the client-side throttle refused the call locally; Run never started
	PriorityRejected                // priority shedding refused the call: the bulkhead was too full for its priority; Run never started
	Hedged                          // the attempt was one of a hedged call's whose answer the caller did not take (recorded alongside its own outcome)
	NumEvents                       // number of event kinds; not an event
)

var eventNames = [NumEvents]string{
	Success:            "SUCCESS",
	Failure:            "FAILURE",
	Timeout:            "TIMEOUT",
	BadRequest:         "BAD_REQUEST",
	ShortCircuited:     "SHORT_CIRCUITED",
	ThreadPoolRejected: "THREAD_POOL_REJECTED",
	SemaphoreRejected:  "SEMAPHORE_REJECTED",
	FallbackSuccess:    "FALLBACK_SUCCESS",
	FallbackFailure:    "FALLBACK_FAILURE",
	FallbackRejection:  "FALLBACK_REJECTION",
	FallbackMissing:    "FALLBACK_MISSING",
	ExceptionThrown:    "EXCEPTION_THROWN",
	Cancelled:          "CANCELLED",
	Slow:               "SLOW",
	QueueTimeout:       "QUEUE_TIMEOUT",
	Probe:              "PROBE",
	ProbeSuccess:       "PROBE_SUCCESS",
	ProbeFailure:       "PROBE_FAILURE",
	RateLimited:        "RATE_LIMITED",
	Retried:            "RETRIED",
	ReadOnly:           "READ_ONLY",
	DegradedStatic:     "DEGRADED_STATIC",
	DegradedLastGood:   "DEGRADED_LAST_GOOD",
	DegradedFeatureOff: "DEGRADED_FEATURE_OFF",
	DegradedDeferred:   "DEGRADED_DEFERRED",
	Coalesced:          "COALESCED",
	Throttled:          "THROTTLED",
	PriorityRejected:   "PRIORITY_REJECTED",
	Hedged:             "HEDGED",
}

// eventLabels are the events' names in lower case (TestEventLabels).
var eventLabels = [NumEvents]string{
	Success:            "success",
	Failure:            "failure",
	Timeout:            "timeout",
	BadRequest:         "bad_request",
	ShortCircuited:     "short_circuited",
	ThreadPoolRejected: "thread_pool_rejected",
	SemaphoreRejected:  "semaphore_rejected",
	FallbackSuccess:    "fallback_success",
	FallbackFailure:    "fallback_failure",
	FallbackRejection:  "fallback_rejection",
	FallbackMissing:    "fallback_missing",
	ExceptionThrown:    "exception_thrown",
	Cancelled:          "cancelled",
	Slow:               "slow",
	QueueTimeout:       "queue_timeout",
	Probe:              "probe",
	ProbeSuccess:       "probe_success",
	ProbeFailure:       "probe_failure",
	RateLimited:        "rate_limited",
	Retried:            "retried",
	ReadOnly:           "read_only",
	DegradedStatic:     "degraded_static",
	DegradedLastGood:   "degraded_last_good",
	DegradedFeatureOff: "degraded_feature_off",
	DegradedDeferred:   "degraded_deferred",
	Coalesced:          "coalesced",
	Throttled:          "throttled",
	PriorityRejected:   "priority_rejected",
	Hedged:             "hedged",
}

// String returns the event's Hystrix-style name, such as "SHORT_CIRCUITED":
// its text in Go (Info.Event printed, log records). docs/events.md lists
// every event's text on every surface.
func (e Event) String() string {
	if e < NumEvents {
		return eventNames[e]
	}
	return "UNKNOWN_EVENT"
}

// Label returns the event's name in lower case, such as "short_circuited":
// its text where it is a label or a key (Prometheus's event label,
// httpguard's X-Degraded header, go-metrics names, error messages).
func (e Event) Label() string {
	if e < NumEvents {
		return eventLabels[e]
	}
	return "unknown_event"
}

// Counts holds one count per Event, indexed by the event.
type Counts [NumEvents]int64

// primaries are the primary outcomes: exactly one per attempt.
var primaries = [...]Event{
	Success, Failure, Timeout, BadRequest, ShortCircuited, ThreadPoolRejected, SemaphoreRejected,
	Cancelled, QueueTimeout, RateLimited, ReadOnly, Coalesced, Throttled, PriorityRejected,
}

// CallEvents are the events Counts.Calls reads: the primary outcomes,
// Retried and Hedged. Rolling.CountsOf with it counts what Calls needs.
var CallEvents = SetOf(append(primaries[:], Retried, Hedged)...)

// Attempts returns the number of attempts counted in c: the sum of its
// primary outcomes, the one outcome each attempt has.
func (c Counts) Attempts() int64 {
	var n int64
	for _, e := range primaries {
		n += c[e]
	}
	return n
}

// Calls returns the number of callers' calls counted in c: its Attempts
// less its Retried and Hedged ones. A call retried twice made three attempts
// and counts once (see package command/retry), and so does a call that made
// two hedges (see package command/hedge). An attempt and its Retried or
// Hedged are recorded together, so a window never holds more of them than
// attempts. Given a snapshot's Cumulative counts it is the number of calls
// since the command was created, a counter that never decreases (what an
// exporter such as the prom module publishes as calls_total).
func (c Counts) Calls() int64 { return c.Attempts() - c[Retried] - c[Hedged] }

// DegradedRate returns the share of the calls in c answered with a
// fallback's value: FallbackSuccess / Calls, 0 when c holds no call.
func (c Counts) DegradedRate() float64 {
	calls := c.Calls()
	if calls <= 0 {
		return 0
	}
	return float64(c[FallbackSuccess]) / float64(calls)
}

// EventSet is a set of events: bit e stands for Event e. A call's events (its
// primary outcome, Slow, a fallback event, ExceptionThrown) travel as one
// EventSet, and Rolling.Record counts them in one bucket lookup. The zero
// value is the empty set.
type EventSet uint32

// allEvents is the set of every event.
const allEvents EventSet = 1<<NumEvents - 1

// SetOf returns the set of the given events.
func SetOf(events ...Event) EventSet {
	var s EventSet
	for _, e := range events {
		s.Add(e)
	}
	return s
}

// Add puts e in the set.
func (s *EventSet) Add(e Event) { *s |= 1 << e }

// Has reports whether e is in the set.
func (s EventSet) Has(e Event) bool { return s&(1<<e) != 0 }

// Len returns the number of events in the set.
func (s EventSet) Len() int { return bits.OnesCount32(uint32(s)) }

// String lists the events in event order, joined by "|", such as
// "TIMEOUT|FALLBACK_SUCCESS".
func (s EventSet) String() string {
	var b strings.Builder
	for e := range NumEvents {
		if s.Has(e) {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(e.String())
		}
	}
	return b.String()
}
