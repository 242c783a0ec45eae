package metrics

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// emptyEpoch marks a bucket that holds no interval.
const emptyEpoch = math.MinInt64

// bucket holds what happened during one bucket interval. epoch is the
// interval's number (time / bucket width); it is written only under the
// ring's mutex, after the counters were zeroed, so a writer that loads the
// current epoch (acquire) adds into freshly zeroed counters.
type bucket struct {
	epoch  atomic.Int64
	counts [NumEvents]atomic.Int64
	max    atomic.Int64
	run    *Histogram // nil when the ring records no latency
	total  *Histogram
}

func (b *bucket) zero() {
	for i := range b.counts {
		b.counts[i].Store(0)
	}
	b.max.Store(0)
	if b.run != nil {
		b.run.reset()
		b.total.reset()
	}
}

// Rolling counts events and latencies over a sliding window of buckets, plus
// cumulative counts since creation. Recording is lock-free and allocation
// free: a bucket is reset lazily by the first write of a new interval (under
// a mutex taken once per bucket interval, not per call).
//
// An event whose instant lies a whole window behind the newest write (a
// writer delayed that long between reading its clock and recording) is kept
// in the cumulative counts only. Reset may lose, or keep, an event recorded
// at the same moment. Rolling is safe for concurrent use.
type Rolling struct {
	window  Window
	width   int64 // bucket width in ns
	buckets []bucket
	total   [NumEvents]atomic.Int64
	mu      sync.Mutex // serialises bucket rotation and Reset
}

// NewRolling returns a ring over w. With latency set, every bucket also
// holds run-time and total-time histograms (about 10 KiB per bucket).
func NewRolling(w Window, latency bool) (*Rolling, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	r := &Rolling{window: w, width: int64(w.BucketWidth()), buckets: make([]bucket, w.Buckets)}
	for i := range r.buckets {
		r.buckets[i].epoch.Store(emptyEpoch)
		if latency {
			r.buckets[i].run = new(Histogram)
			r.buckets[i].total = new(Histogram)
		}
	}
	return r, nil
}

// Window returns the window the ring covers.
func (r *Rolling) Window() Window { return r.window }

// at returns the bucket for instant now, rotating it in if needed, or nil if
// now is older than what the bucket's slot already holds.
func (r *Rolling) at(now time.Duration) *bucket {
	ep := r.epoch(now)
	n := int64(len(r.buckets))
	b := &r.buckets[(ep%n+n)%n]
	if b.epoch.Load() == ep {
		return b
	}
	return r.rotate(b, ep)
}

func (r *Rolling) rotate(b *bucket, ep int64) *bucket {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch cur := b.epoch.Load(); {
	case cur == ep:
		return b
	case cur > ep:
		return nil
	}
	b.zero()
	b.epoch.Store(ep)
	return b
}

// Add counts one event at instant now, in the window and cumulatively.
func (r *Rolling) Add(now time.Duration, e Event) {
	r.total[e].Add(1)
	if b := r.at(now); b != nil {
		b.counts[e].Add(1)
	}
}

// ObserveRun records a run-time latency at instant now. It does nothing on
// a ring created without latency.
func (r *Rolling) ObserveRun(now, d time.Duration) {
	if b := r.at(now); b != nil && b.run != nil {
		b.run.Record(d)
	}
}

// ObserveTotal records an end-to-end latency (as the caller saw it) at
// instant now. It does nothing on a ring created without latency.
func (r *Rolling) ObserveTotal(now, d time.Duration) {
	if b := r.at(now); b != nil && b.total != nil {
		b.total.Record(d)
	}
}

// ObserveMax raises the rolling maximum (for example peak concurrency) to v
// if v is larger.
func (r *Rolling) ObserveMax(now time.Duration, v int64) {
	b := r.at(now)
	if b == nil {
		return
	}
	for {
		cur := b.max.Load()
		if v <= cur || b.max.CompareAndSwap(cur, v) {
			return
		}
	}
}

// epoch returns the number of the bucket interval holding now, rounding
// down so that instants before the clock's origin work too.
func (r *Rolling) epoch(now time.Duration) int64 {
	ep := int64(now) / r.width
	if now < 0 && int64(now)%r.width != 0 {
		ep--
	}
	return ep
}

// live reports whether a bucket holding epoch ep lies in the window ending at
// epoch cur.
func (r *Rolling) live(ep, cur int64) bool {
	return ep <= cur && ep > cur-int64(len(r.buckets))
}

// Counts returns the event counts in the window that ends at now. It reads
// only counters, so it is cheap enough for a breaker to call on each failure.
func (r *Rolling) Counts(now time.Duration) Counts {
	var c Counts
	cur := r.epoch(now)
	for i := range r.buckets {
		b := &r.buckets[i]
		if !r.live(b.epoch.Load(), cur) {
			continue
		}
		for e := range c {
			c[e] += b.counts[e].Load()
		}
	}
	return c
}

// Cumulative returns the event counts since the ring was created; Reset does
// not clear them.
func (r *Rolling) Cumulative() Counts {
	var c Counts
	for e := range c {
		c[e] = r.total[e].Load()
	}
	return c
}

// Reset empties the window (cumulative counts are kept). A circuit breaker
// calls it on closing so that old failures cannot reopen it.
func (r *Rolling) Reset(now time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.buckets {
		r.buckets[i].epoch.Store(emptyEpoch)
		r.buckets[i].zero()
	}
}

// Snapshot is an immutable summary of a ring at one instant.
type Snapshot struct {
	Window     Window
	Counts     Counts  // events in the window
	Cumulative Counts  // events since creation
	Max        int64   // largest ObserveMax value in the window
	Run        Latency // run time (zero on a ring without latency)
	Total      Latency // end-to-end time (zero on a ring without latency)
}

// Snapshot summarises the window that ends at now. It costs a pass over every
// histogram bin, so call it on a schedule (the stream does, every 500 ms),
// not per request.
func (r *Rolling) Snapshot(now time.Duration) Snapshot {
	s := Snapshot{Window: r.window, Cumulative: r.Cumulative()}
	cur := r.epoch(now)
	var run, total *histAccumulator
	if r.buckets[0].run != nil {
		run, total = new(histAccumulator), new(histAccumulator)
	}
	for i := range r.buckets {
		b := &r.buckets[i]
		if !r.live(b.epoch.Load(), cur) {
			continue
		}
		for e := range s.Counts {
			s.Counts[e] += b.counts[e].Load()
		}
		s.Max = max(s.Max, b.max.Load())
		if run != nil {
			run.add(b.run)
			total.add(b.total)
		}
	}
	if run != nil {
		s.Run, s.Total = run.latency(), total.latency()
	}
	return s
}
