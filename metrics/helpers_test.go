package metrics

import "time"

// Add, ObserveRun and ObserveTotal record one thing each, for tests that
// build a window piece by piece; the executor records a whole call with
// Record.

// Add counts one event at instant now, in the window and cumulatively.
func (r *Rolling) Add(now time.Duration, e Event) { r.Record(now, SetOf(e), NoLatency, NoLatency) }

// ObserveRun records a run-time latency at instant now, as Histogram.Record
// does (a negative d counts as zero): a Record without an event. It does
// nothing on a ring created without latency.
func (r *Rolling) ObserveRun(now, d time.Duration) { r.Record(now, 0, max(d, 0), NoLatency) }

// ObserveTotal records an end-to-end latency (as the caller saw it) at
// instant now, as Histogram.Record does (a negative d counts as zero): a
// Record without an event. It does nothing on a ring created without
// latency.
func (r *Rolling) ObserveTotal(now, d time.Duration) { r.Record(now, 0, NoLatency, max(d, 0)) }
