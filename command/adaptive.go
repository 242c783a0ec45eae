package command

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// AdaptiveConfig turns on a group's adaptive concurrency limit
// (GroupConfig.Adaptive): the group's bulkhead is resized to a limit that
// follows the dependency, within [Min, Max], instead of staying at
// MaxConcurrent. The zero value is off; setting any field turns it on.
//
// The rule is a latency gradient (after Netflix's concurrency-limits and
// Envoy's adaptive concurrency filter). Over each Window the group
// averages the Run latency of the attempts that reached the dependency and
// were answered (SUCCESS, BAD_REQUEST, and TIMEOUT with the time it
// waited; a FAILURE can be fast for reasons that say nothing of load, and
// is left out). The lowest such average seen is the no-load latency
// estimate. At the window's end the limit L moves to
//
//	(1 − Smoothing)·L + Smoothing·(L·gradient + √L)
//	gradient = max(0.5, min(1, Tolerance · noLoad / latency))
//
// so that, where the dependency's latency grows with the calls it holds
// (a queue forms once it is at capacity), the limit settles at the
// dependency's capacity plus √L calls of queue: the latency of L calls
// before a capacity of C is noLoad·L/C, and L·C/L is C. While the
// dependency is not queueing, the gradient is 1 and the limit grows by
// about Smoothing·√L a window.
//
// A window in which the bulkhead never held half the limit says nothing
// about a higher limit (the callers, not the dependency, bound the calls
// in flight): it moves the limit towards twice the peak the bulkhead held,
// and the no-load estimate a twentieth of the way towards its average, so
// that the estimate follows a dependency that has become slower for good.
// A window of saturated calls never raises the estimate. A window with
// fewer than 10 samples is extended until it has them; one whose average
// is 0 (latencies below the clock's resolution) moves nothing. The peak is
// the bulkhead's occupancy as the attempts arrive at it.
//
// A call refused because the bulkhead is at the adaptive limit is a
// bulkhead rejection (SEMAPHORE_REJECTED or THREAD_POOL_REJECTED, with
// ErrRefused and isolation.ErrRejected), as at any other size: the adaptive limit is the
// bulkhead's size, not a second gate, so the bulkhead's occupancy
// (GroupSnapshot.Bulkhead: Capacity is the limit in force) and priority
// shedding (GroupConfig.Priority, which reserves shares of that capacity)
// see it as they see a static size. In a Thread group the limit is the
// pool's size; QueueSize stays as configured.
//
// It changes live through Reconfigure: the limit and the estimates are
// kept (the limit clamped into the new [Min, Max]); Initial applies only
// when the limit is turned on. GroupSnapshot.Adaptive shows the limit and
// the two latencies it follows.
type AdaptiveConfig struct {
	// Min and Max bound the limit: 1 <= Min <= Max. Default Min 1; Max must
	// be set. MaxConcurrent must be 0 (it is then Max) or equal to Max.
	Min, Max int
	// Initial is the limit the group starts with, in [Min, Max]. Default
	// Max: the bulkhead starts as a static one of Max calls would, and
	// comes down when the latency says the dependency is queueing.
	Initial int
	// Tolerance is how much the latency may exceed the no-load estimate
	// before the limit comes down, as a ratio in [1, 10]: 1.5 lets the
	// latency grow by half. Default 1.
	Tolerance float64
	// Smoothing is the weight of a window's verdict in the new limit, in
	// (0, 1]: lower is smoother and slower. Default 0.2.
	Smoothing float64
	// Window is how long the latencies are averaged before the limit
	// moves. Default 250 ms.
	Window time.Duration
}

// AdaptiveStatus tells a group's adaptive concurrency limit in a
// GroupSnapshot; the zero value when it is off.
type AdaptiveStatus struct {
	Limit   int           // the limit in force: the bulkhead's size
	NoLoad  time.Duration // the no-load latency estimate
	Latency time.Duration // the last window's average latency
}

// The rule's constants (see AdaptiveConfig).
const (
	adaptiveMinSamples = 10       // a window with fewer is extended
	adaptiveForget     = 1.0 / 20 // the no-load estimate's move towards a window's average while the callers bound the load
)

// enabled reports whether the config turns the limit on.
func (c *AdaptiveConfig) enabled() bool { return *c != AdaptiveConfig{} }

// withDefaults returns c with its zero fields at their defaults; off stays
// off.
func (c AdaptiveConfig) withDefaults() AdaptiveConfig {
	if !c.enabled() {
		return c
	}
	if c.Min == 0 {
		c.Min = 1
	}
	if c.Initial == 0 {
		c.Initial = c.Max
	}
	if c.Tolerance == 0 {
		c.Tolerance = 1
	}
	if c.Smoothing == 0 {
		c.Smoothing = 0.2
	}
	if c.Window == 0 {
		c.Window = 250 * time.Millisecond
	}
	return c
}

// validate reports an invalid field of c (with defaults applied), named
// as GroupConfig.Adaptive's, in a group whose MaxConcurrent as given is
// maxConcurrent.
func (c *AdaptiveConfig) validate(maxConcurrent int) error {
	switch {
	case !c.enabled():
		return nil
	case c.Min < 1:
		return invalid("Adaptive.Min %d must be at least 1", c.Min)
	case c.Max < c.Min || c.Max > math.MaxInt32:
		return invalid("Adaptive.Max %d must be between Adaptive.Min %d and %d", c.Max, c.Min, math.MaxInt32)
	case c.Initial < c.Min || c.Initial > c.Max:
		return invalid("Adaptive.Initial %d must be between Adaptive.Min %d and Adaptive.Max %d", c.Initial, c.Min, c.Max)
	case math.IsNaN(c.Tolerance) || c.Tolerance < 1 || c.Tolerance > 10:
		return invalid("Adaptive.Tolerance %v must be between 1 and 10", c.Tolerance)
	case math.IsNaN(c.Smoothing) || c.Smoothing <= 0 || c.Smoothing > 1:
		return invalid("Adaptive.Smoothing %v must be above 0 and at most 1", c.Smoothing)
	case c.Window < 0:
		return invalid("Adaptive.Window %v must not be negative", c.Window)
	case maxConcurrent != 0 && maxConcurrent != c.Max:
		return invalid("MaxConcurrent %d differs from Adaptive.Max %d: with Adaptive the bulkhead's size is the adaptive limit; leave MaxConcurrent 0",
			maxConcurrent, c.Max)
	}
	return nil
}

// adaptiveLimit is a group's adaptive concurrency limit. The attempts that
// reached the dependency feed the window's sums with atomic adds (sample);
// the first attempt to see the window over closes it, under mu, and moves
// the limit and the bulkhead's size. A sample that lands while another
// closes the window may count in the next one.
type adaptiveLimit struct {
	g *Group

	sum, n, peak atomic.Int64 // the window's latencies (ns), their count, the bulkhead's peak occupancy seen by arrivals
	end          atomic.Int64 // the window's end, on the group's clock

	mu      sync.Mutex // closes a window, and Reconfigure; guards the fields below
	cfg     AdaptiveConfig
	queue   int     // the pool's queue size (Thread), for Resize
	limit   float64 // the limit, before rounding
	noLoad  float64 // the no-load latency estimate, ns; 0: no window yet
	latency float64 // the last window's average, ns

	status atomic.Pointer[AdaptiveStatus] // for snapshots
}

// configure applies the Adaptive of cfg to the limit at now and sizes the
// bulkhead, under g.mu (NewGroup, Reconfigure): a limit turned on starts
// at Initial, one that stays on is clamped into the new bounds, and a limit
// turned off leaves the bulkhead at MaxConcurrent. The bulkhead refuses
// only once closed, which g.mu excludes.
func (a *adaptiveLimit) configure(cfg *GroupConfig, now time.Duration) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	wasOn := a.cfg.enabled()
	a.cfg, a.queue = cfg.Adaptive, cfg.QueueSize
	if !a.cfg.enabled() {
		return a.g.resize(cfg.MaxConcurrent, a.queue)
	}
	if !wasOn {
		a.limit, a.noLoad, a.latency = float64(a.cfg.Initial), 0, 0
		a.sum.Store(0)
		a.n.Store(0)
		a.peak.Store(0)
	}
	a.limit = min(max(a.limit, float64(a.cfg.Min)), float64(a.cfg.Max))
	a.end.Store(int64(now + a.cfg.Window))
	return a.g.resize(a.publish(), a.queue)
}

// publish stores the status and returns the limit in calls.
func (a *adaptiveLimit) publish() int {
	n := int(math.Round(a.limit))
	a.status.Store(&AdaptiveStatus{Limit: n, NoLoad: time.Duration(a.noLoad), Latency: time.Duration(a.latency)})
	return n
}

// arrive tells the limit that an attempt arrives at the bulkhead while it
// holds held calls: the window's peak occupancy is that of the arrivals,
// this one included (at most the capacity, which it cannot pass).
func (a *adaptiveLimit) arrive(held, capacity int) {
	n := int64(min(held+1, capacity))
	for p := a.peak.Load(); n > p && !a.peak.CompareAndSwap(p, n); p = a.peak.Load() {
	}
}

// sample feeds the limit one attempt's latency, ended at now, and closes
// the window if it is over.
func (a *adaptiveLimit) sample(now, latency time.Duration) {
	a.sum.Add(int64(latency))
	a.n.Add(1)
	if int64(now) >= a.end.Load() && a.mu.TryLock() {
		a.close(now)
		a.mu.Unlock()
	}
}

// close ends the window at now, under mu, unless it has too few samples
// (or another goroutine has closed it already), and moves the limit.
func (a *adaptiveLimit) close(now time.Duration) {
	if !a.cfg.enabled() || int64(now) < a.end.Load() || a.n.Load() < adaptiveMinSamples {
		return
	}
	a.end.Store(int64(now + a.cfg.Window))
	sum, n, peak := a.sum.Swap(0), a.n.Swap(0), a.peak.Swap(0)
	if n <= 0 || sum <= 0 {
		return // latencies below the clock's resolution: nothing to compare
	}
	before := int(math.Round(a.limit))
	a.move(float64(sum)/float64(n), float64(peak))
	if limit := a.publish(); limit != before {
		_ = a.g.resize(limit, a.queue) // a closed bulkhead refuses, and stays closed
	}
}

// move is the rule: it updates the estimates with a window's average
// latency m (ns) and the bulkhead's peak occupancy in it, and moves the
// limit (see AdaptiveConfig).
func (a *adaptiveLimit) move(m, peak float64) {
	a.latency = m
	s := a.cfg.Smoothing
	next := 2 * peak // the callers bound the calls in flight, not the limit: keep room to double
	switch limited := peak >= a.limit/2; {
	case a.noLoad == 0 || m < a.noLoad:
		a.noLoad = m
	case !limited:
		a.noLoad += (m - a.noLoad) * adaptiveForget
	}
	if peak >= a.limit/2 {
		gradient := max(0.5, min(1, a.cfg.Tolerance*a.noLoad/m))
		next = a.limit*gradient + math.Sqrt(a.limit)
	}
	a.limit = min(max((1-s)*a.limit+s*next, float64(a.cfg.Min)), float64(a.cfg.Max))
}

// resize sets the bulkhead's size: the pool's to size workers and a queue
// of queue, or the semaphore's to size permits.
func (g *Group) resize(size, queue int) error {
	if g.pool != nil {
		return g.pool.Resize(size, queue)
	}
	return g.sem.Resize(size)
}

// adaptiveSnapshot returns the status of the group's adaptive limit under
// c; the zero value when it is off.
func (g *Group) adaptiveSnapshot(c *liveConfig) AdaptiveStatus {
	if !c.Adaptive.enabled() {
		return AdaptiveStatus{}
	}
	return *g.adaptive.status.Load()
}

// adaptArrive is the last step of the limit stage's rare path: the
// group's adaptive limit, if the call's settings have one, sees the
// attempt arrive at the bulkhead. It always lets the attempt go on.
func (k *call) adaptArrive() bool {
	if a := k.cs.adaptive; a != nil {
		a.arrive(k.g.occupancy())
	}
	return true
}

// adapt feeds the group's adaptive limit, if the call's settings have one,
// the attempt that just ended: its Run latency when it reached the
// dependency and was answered or timed out (see AdaptiveConfig). It runs
// in the limited path of finish, and in retried.
func (k *call) adapt() {
	a := k.cs.adaptive
	if a == nil || !k.r.ran {
		return
	}
	switch k.r.event {
	case metrics.Success, metrics.BadRequest, metrics.Timeout:
		a.sample(k.now, k.r.run)
	}
}
