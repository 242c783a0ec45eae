// Package metrics holds bulwark's rolling statistics: a ring of time buckets
// that counts every command outcome and records latencies, read lock-free by
// the circuit breakers and periodically by the dashboard stream.
//
// A [Rolling] covers a [Window] (for example 10 s in 10 buckets). Each bucket
// holds one atomic counter per [Event], a rolling maximum and, optionally, two
// fixed log-linear latency [Histogram]s (run time and total time), created by
// the first latency recorded in the bucket's slot; the bucket itself is
// created by its slot's first use. Buckets
// rotate lazily: the first write that lands in a new bucket interval resets
// the slot it reuses, so an idle ring costs nothing and needs no goroutine.
// Readers sum only the buckets whose interval lies inside the window, so an
// idle gap longer than the window reads as empty without any rotation.
// A ring with latency also keeps running sums of its completed buckets'
// histograms, updated when a bucket rotates in or out, so a Snapshot reads
// those sums and the newest bucket instead of merging every bucket's bins
// (and reuses its last result when neither changed); it stays equal to a
// full merge of the live buckets, late writers included.
//
// Every method takes the current time as an argument: the caller reads its
// [Clock] once and hands the same instant to every ring it updates (see
// PERFORMANCE.md for why).
//
//	clock := metrics.SystemClock()
//	r, err := metrics.NewRolling(metrics.Window{Length: 10 * time.Second, Buckets: 10}, metrics.CountsAndLatencies)
//	if err != nil { ... }
//	start := clock.Now()
//	// ... do the work ...
//	now := clock.Now()
//	r.Record(now, metrics.SetOf(metrics.Success), metrics.NoLatency, now-start)
//	fmt.Println(r.Snapshot(clock.Now()).Total.Percentiles)
//
// Record counts a whole call: its events as an [EventSet], its run and total
// latencies. ObserveMax raises the rolling maximum (a peak concurrency, say).
// Counts reads every event's count in the window; a reader on a call path
// that needs a few events reads only those, with CountsOf (a retry budget's
// calls) or Count (one event's).
// Cumulative counts since creation are kept beside the window, and so are
// the latencies (CumulativeLatency, a [Distribution] per phase): a rotation
// moves what leaves the window into them, for exporters of cumulative
// histograms such as the prom module.
//
// Rotation itself lives in bulwark's internal ring package, which the
// module's own narrower windows share (a circuit breaker's health window,
// counting only the four events it judges; a group's peak of calls running
// at once): one implementation for all of them.
//
// Package gmbridge publishes these windows as go-metrics gauges; this
// package depends on nothing outside the standard library.
package metrics
