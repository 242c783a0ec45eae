// Package adaptive configures a group's adaptive concurrency limit
// (command.GroupConfig.Adaptive): the group's bulkhead is resized to a limit
// that follows the dependency, within [Min, Max], instead of staying at
// command.GroupConfig.MaxConcurrent. The zero value of Config is off; setting
// any field turns it on.
//
// The rule is a latency gradient (after Netflix's concurrency-limits and
// Envoy's adaptive concurrency filter). Over each Window the group averages the
// Run latency of the attempts that reached the dependency and were answered
// (SUCCESS, BAD_REQUEST, and TIMEOUT with the time it waited; a FAILURE can be
// fast for reasons that say nothing of load, and is left out). The lowest such
// average seen is the no-load latency estimate. At the window's end the limit L
// moves to
//
//	(1 − Smoothing)·L + Smoothing·(L·gradient + √L)
//	gradient = max(0.5, min(1, Tolerance · noLoad / latency))
//
// so that, where the dependency's latency grows with the calls it holds (a
// queue forms once it is at capacity), the limit settles at the dependency's
// capacity plus √L calls of queue: the latency of L calls before a capacity of
// C is noLoad·L/C, and L·C/L is C. While the dependency is not queueing, the
// gradient is 1 and the limit grows by about Smoothing·√L a window.
//
// A window in which the bulkhead never held half the limit says nothing about a
// higher limit (the callers, not the dependency, bound the calls in flight): it
// moves the limit towards twice the peak the bulkhead held, and the no-load
// estimate a twentieth of the way towards its average, so that the estimate
// follows a dependency that has become slower for good. A window of saturated
// calls never raises the estimate. A window with fewer than 10 samples is
// extended until it has them; one whose average is 0 (latencies below the
// clock's resolution) moves nothing. The peak is the bulkhead's occupancy as
// the attempts arrive at it.
//
// A call refused because the bulkhead is at the adaptive limit is a bulkhead
// rejection (SEMAPHORE_REJECTED or THREAD_POOL_REJECTED, with ErrRefused and
// isolation.ErrRejected), as at any other size: the adaptive limit is the
// bulkhead's size, not a second gate, so the bulkhead's occupancy
// (command.GroupSnapshot.Bulkhead: Capacity is the limit in force) and priority
// shedding (command.GroupConfig.Priority, which reserves shares of that
// capacity) see it as they see a static size. In a Thread group the limit is
// the pool's size; QueueSize stays as configured.
//
// It changes live through command.Group.Reconfigure: the limit and the
// estimates are kept (the limit clamped into the new [Min, Max]); Initial
// applies only when the limit is turned on. command.GroupSnapshot.Adaptive
// shows the limit and the two latencies it follows.
package adaptive

import "time"

// Config is the limit's configuration; see the package documentation for the
// rule it drives.
type Config struct {
	// Min and Max bound the limit: 1 <= Min <= Max. Default Min 1; Max must be
	// set. command.GroupConfig.MaxConcurrent must be 0 (it is then Max) or equal
	// to Max.
	Min, Max int
	// Initial is the limit the group starts with, in [Min, Max]. Default Max: the
	// bulkhead starts as a static one of Max calls would, and comes down when the
	// latency says the dependency is queueing.
	Initial int
	// Tolerance is how much the latency may exceed the no-load estimate before the
	// limit comes down, as a ratio in [1, 10]: 1.5 lets the latency grow by half.
	// Default 1.
	Tolerance float64
	// Smoothing is the weight of a window's verdict in the new limit, in (0, 1]:
	// lower is smoother and slower. Default 0.2.
	Smoothing float64
	// Window is how long the latencies are averaged before the limit moves.
	// Default 250 ms.
	Window time.Duration
}

// Status tells a group's adaptive concurrency limit in a command.GroupSnapshot;
// the zero value when it is off.
type Status struct {
	Limit   int           // the limit in force: the bulkhead's size
	NoLoad  time.Duration // the no-load latency estimate
	Latency time.Duration // the last window's average latency
}
