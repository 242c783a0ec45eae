package metrics

// Event is one kind of thing that can happen to a command call. The names
// follow Hystrix so the stream stays compatible with its tooling; Cancelled
// and Slow are bulwark's own.
type Event uint8

// The events counted in every bucket. A call has exactly one primary outcome
// (Success, Failure, Timeout, BadRequest, ShortCircuited, ThreadPoolRejected,
// SemaphoreRejected or Cancelled); the others are recorded alongside it.
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
}

// String returns the event's Hystrix-style name, such as "SHORT_CIRCUITED".
func (e Event) String() string {
	if e < NumEvents {
		return eventNames[e]
	}
	return "UNKNOWN_EVENT"
}

// Counts holds one count per Event, indexed by the event.
type Counts [NumEvents]int64
