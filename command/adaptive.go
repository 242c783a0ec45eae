package command

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/command/adaptive"
	"github.com/bulwark-go/bulwark/metrics"
)

// The rule's constants (see package adaptive).
const (
	adaptiveMinSamples = 10       // a window with fewer is extended
	adaptiveForget     = 1.0 / 20 // the no-load estimate's move towards a window's average while the callers bound the load
)

// adaptiveOn reports whether c turns the limit on.
func adaptiveOn(c *adaptive.Config) bool { return *c != adaptive.Config{} }

// adaptiveDefaults returns c with its zero fields at their defaults; off stays
// off.
func adaptiveDefaults(c adaptive.Config) adaptive.Config {
	if !adaptiveOn(&c) {
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

// validateAdaptive reports an invalid field of c (with defaults applied), named
// as GroupConfig.Adaptive's, in a group whose MaxConcurrent as given is
// maxConcurrent.
func validateAdaptive(c *adaptive.Config, maxConcurrent int) error {
	switch {
	case !adaptiveOn(c):
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
// reached the dependency feed the window's sums (sample); the first attempt
// to see the window over closes it, under mu, and moves the limit and the
// bulkhead's size. A sample that lands while another closes the window may
// count in the next one, but whole: its latency and its count go to the
// same window.
type adaptiveLimit struct {
	g *Group

	win  adaptiveWindow
	peak atomic.Int64 // the bulkhead's peak occupancy in the window, seen by arrivals
	end  atomic.Int64 // the window's end, on the group's clock

	mu      sync.Mutex // closes a window, and Reconfigure; guards the fields below
	cfg     adaptive.Config
	queue   int     // the pool's queue size (Thread), for Resize
	limit   float64 // the limit, before rounding
	noLoad  float64 // the no-load latency estimate, ns; 0: no window yet
	latency float64 // the last window's average, ns

	status atomic.Pointer[adaptive.Status] // for snapshots
}

// adaptiveWindow is the latencies sampled in the window under way: their sum
// and count change together, under a lock of their own, held for an add or
// a take, never while a window closes or the bulkhead is resized. (Two
// atomic adds would let a close fall between a sample's two: its latency
// would count in one window and its count in the next, and the lower
// average of the second would set the no-load estimate, which keeps the
// lowest.)
type adaptiveWindow struct {
	mu  sync.Mutex
	sum int64 // the latencies, ns
	n   int64
}

// add adds one latency to w.
func (w *adaptiveWindow) add(latency time.Duration) {
	w.mu.Lock()
	w.sum += int64(latency)
	w.n++
	w.mu.Unlock()
}

// take returns w's sum and count and empties w, if it holds least
// latencies or more; else it returns zeros and leaves w as it is.
func (w *adaptiveWindow) take(least int64) (sum, n int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n < least {
		return 0, 0
	}
	sum, n = w.sum, w.n
	w.sum, w.n = 0, 0
	return sum, n
}

// configure applies the Adaptive of cfg to the limit at now and sizes the
// bulkhead, under g.mu (NewGroup, Reconfigure): a limit turned on starts
// at Initial, one that stays on is clamped into the new bounds, and a limit
// turned off leaves the bulkhead at MaxConcurrent. The bulkhead refuses
// only once closed, which g.mu excludes.
func (a *adaptiveLimit) configure(cfg *GroupConfig, now time.Duration) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	wasOn := adaptiveOn(&a.cfg)
	a.cfg, a.queue = cfg.Adaptive, cfg.QueueSize
	if !adaptiveOn(&a.cfg) {
		return a.g.resize(cfg.MaxConcurrent, a.queue)
	}
	if !wasOn {
		a.limit, a.noLoad, a.latency = float64(a.cfg.Initial), 0, 0
		a.win.take(0)
		a.peak.Store(0)
	}
	a.limit = min(max(a.limit, float64(a.cfg.Min)), float64(a.cfg.Max))
	a.end.Store(int64(now + a.cfg.Window))
	return a.g.resize(a.publish(), a.queue)
}

// publish stores the status and returns the limit in calls.
func (a *adaptiveLimit) publish() int {
	n := int(math.Round(a.limit))
	a.status.Store(&adaptive.Status{Limit: n, NoLoad: time.Duration(a.noLoad), Latency: time.Duration(a.latency)})
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
	a.win.add(latency)
	if int64(now) >= a.end.Load() && a.mu.TryLock() {
		a.close(now)
		a.mu.Unlock()
	}
}

// close ends the window at now, under mu, unless it has too few samples
// (or another goroutine has closed it already), and moves the limit.
func (a *adaptiveLimit) close(now time.Duration) {
	if !adaptiveOn(&a.cfg) || int64(now) < a.end.Load() {
		return
	}
	sum, n := a.win.take(adaptiveMinSamples)
	if n == 0 {
		return
	}
	a.end.Store(int64(now + a.cfg.Window))
	peak := a.peak.Swap(0)
	if sum <= 0 {
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
// limit (see adaptive.Config).
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
func (g *Group) adaptiveSnapshot(c *liveConfig) adaptive.Status {
	if !adaptiveOn(&c.Adaptive) {
		return adaptive.Status{}
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
// dependency and was answered or timed out (see adaptive.Config). It runs
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
