package metrics

import "time"

// Add, ObserveRun and ObserveTotal record one thing each, for tests that
// build a window piece by piece; the executor records a whole call with
// Record.

// Add counts one event at instant now, in the window and cumulatively.
func (r *Rolling) Add(now time.Duration, e Event) { r.RecordCounts(now, SetOf(e)) }

// ObserveRun records a run-time latency at instant now, as Histogram.Record
// does (a negative d counts as zero). It does nothing on a ring created
// without latency.
func (r *Rolling) ObserveRun(now, d time.Duration) {
	if l := r.latenciesAt(now); l != nil {
		apart(&l.run).record(max(int64(d), 0))
	}
}

// ObserveTotal records an end-to-end latency (as the caller saw it) at
// instant now, as Histogram.Record does (a negative d counts as zero). It
// does nothing on a ring created without latency.
func (r *Rolling) ObserveTotal(now, d time.Duration) {
	if l := r.latenciesAt(now); l != nil {
		apart(&l.total).record(max(int64(d), 0))
	}
}

// latenciesAt returns the latencies of the bucket for instant now, created
// if needed; nil on a ring without latency or for an instant too late for
// any bucket.
func (r *Rolling) latenciesAt(now time.Duration) *latencies {
	b := r.at(now)
	if b == nil {
		return nil
	}
	r.newLatencies(b)
	return b.lat.Load()
}
