package metrics

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/internal/cacheline"
	"github.com/bulwark-go/bulwark/internal/ring"
)

// bucket holds what happened during one bucket interval; the interval is
// the ring's epoch of the bucket's slot (see ring).
//
// lat is created by the first latency recorded in the slot (see
// Rolling.firstLatencies) and kept across rotations: nil, the bucket holds no
// latency, and always nil on a ring without latency.
//
// Every call reads lat and writes counts. lat comes last, on the cache line
// of the counts of the events a call rarely has (from ProbeSuccess on: probe
// verdicts, rate limiting, retries, degraded answers, hedges), of max, which
// ObserveMax writes only when it rises, and of bare: a common call (Success,
// Failure, Timeout, Slow, a rejection, a fallback) writes only the first
// line, so that its write on one core does not invalidate the line every
// other core reads lat from (TestBucketLayout). The padding, before lat,
// makes a bucket whole lines, and so its allocation (each bucket is one of
// its own: see Rolling.buckets).
//
// bare counts the writes that carried no event (see bucket.add): with the
// counts, it changes on every Record, after its latencies, which is what the
// window's running sums check a bucket by (see windowsum.go). It is emptied
// with the counts and counted nowhere else.
type bucket struct {
	counts [NumEvents]atomic.Int64
	max    atomic.Int64
	bare   atomic.Int64
	_      [(cacheline.Size - (int(NumEvents)+3)*8%cacheline.Size) % cacheline.Size]byte
	lat    atomic.Pointer[latencies] // last: a zero-size last field would add a word
}

// writes returns the sum of b's counts and bare: it grows with every Record
// into b, and only a rotation or Reset (which empty b) lowers it. A nil b, a
// slot never used, holds none.
func (b *bucket) writes() int64 {
	if b == nil {
		return 0
	}
	n := b.bare.Load()
	for e := range b.counts {
		n += b.counts[e].Load()
	}
	return n
}

// latencies returns b's latencies: nil for none, and for a nil b (a slot
// never used).
func (b *bucket) latencies() *latencies {
	if b == nil {
		return nil
	}
	return b.lat.Load()
}

// latencies holds a bucket's run and total latencies in three histograms, so
// that the common call, whose run and total latencies are equal (nothing
// happened after Run: no fallback, no queue), costs one histogram record
// instead of two. Run is same+run, Total is same+total, exactly. run and
// total are created when first needed (a ring whose calls never differ
// never has them) and kept across rotations. The pointers come first, on
// the cache line of same's sum and bin 0, so that a reader skipping an
// empty bucket (Histogram.empty) reads one line.
type latencies struct {
	run, total atomic.Pointer[Histogram]
	same       Histogram
}

// apart returns the histogram in p, creating it if needed.
func apart(p *atomic.Pointer[Histogram]) *Histogram {
	if h := p.Load(); h != nil {
		return h
	}
	return create(p)
}

// create is apart's first use: it installs a new histogram in p, unless
// another writer just did. Kept out of line so that apart is inlined.
//
//go:noinline
func create(p *atomic.Pointer[Histogram]) *Histogram {
	p.CompareAndSwap(nil, new(Histogram))
	return p.Load()
}

// addTo merges the bucket's run and total latencies into run and total; a
// nil l holds none.
func (l *latencies) addTo(run, total *histAccumulator) {
	if l == nil {
		return
	}
	run.add(&l.same)
	total.add(&l.same)
	if h := l.run.Load(); h != nil {
		run.add(h)
	}
	if h := l.total.Load(); h != nil {
		total.add(h)
	}
}

// Rolling counts events and latencies over a sliding window of buckets, plus
// cumulative counts since creation. Recording is lock-free and allocation
// free: a bucket is reset lazily by the first write of a new interval (under
// a mutex taken once per bucket interval, not per call). A call's events and
// latencies go in with one Record, one bucket lookup. (The exceptions to
// "allocation free", each once for the ring's life: a slot's first rotation
// creates its bucket, 256 bytes, so a ring whose calls fell in one bucket
// holds one; on a ring with latency, the first latency recorded in a bucket
// slot creates the slot's histogram, and the first call of a slot whose run
// and total latencies differ the histograms for such calls; so does the
// first rotation that has latencies to move or sum, for the ring's
// cumulative latencies and running sums.)
//
// An event whose instant lies a whole window behind the newest write (a
// writer delayed that long between reading its clock and recording) is kept
// in the cumulative counts only. Reset may lose, or keep, an event recorded
// at the same moment in the window, never in the cumulative counts. Rolling
// is safe for concurrent use.
type Rolling struct {
	ring    ring.Ring // the buckets' intervals; its mutex guards what is said below
	window  Window
	buckets []*bucket // nil until the slot's first rotation creates it, then kept (written under the ring's mutex)
	withLat bool      // the ring records latencies (CountsAndLatencies)

	// The cumulative counts are folded, not counted twice: each event is
	// added to its bucket only, and a rotation or Reset moves the bucket's
	// counts into folded (swapping them out, so a racing add is never lost
	// nor doubled). Cumulative sums folded and the buckets under the ring's mutex. Events
	// too late for any bucket go straight into folded.
	folded [NumEvents]atomic.Int64

	// foldedLat holds the latencies rotation and Reset moved out of the
	// buckets, and those of calls too late for any bucket, as folded does
	// the counts (see CumulativeLatency); nil until there were some, and
	// always on a ring without latency. Guarded by the ring's mutex.
	foldedLat *latencyTotals

	// sums holds the running sums of the window's latencies (see
	// windowsum.go); nil until a rotation finds latencies in a bucket it
	// does not rotate in, and always on a ring without latency. Guarded by
	// the ring's mutex.
	sums *windowSums
}

// Contents says what a ring records.
type Contents uint8

// The contents of a ring.
const (
	// CountsOnly records events and the rolling maximum.
	CountsOnly Contents = iota
	// CountsAndLatencies also records run-time and total-time latencies in
	// every bucket: a bucket slot's histogram is created by the first
	// latency recorded in it, 5 KiB per bucket slot while every call's run
	// and total latencies are equal, 15 KiB once some differ. The window's
	// running sums (11 KiB, and 10 KiB more for each phase once some run
	// and total latencies differ) are created by the first rotation that
	// finds latencies in another bucket, and the cumulative latencies,
	// which hold only the bins used (16 bytes each), by the first rotation
	// that moves some. A ring whose calls all fell in one bucket holds one
	// histogram.
	CountsAndLatencies
)

// NewRolling returns a ring over w that records what c says.
func NewRolling(w Window, c Contents) (*Rolling, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if c > CountsAndLatencies {
		return nil, fmt.Errorf("%w: Contents %d is not CountsOnly or CountsAndLatencies", ErrInvalidConfig, c)
	}
	return &Rolling{ring: ring.New(w.BucketWidth(), w.Buckets), window: w, buckets: make([]*bucket, w.Buckets), withLat: c == CountsAndLatencies}, nil
}

// Window returns the window the ring covers.
func (r *Rolling) Window() Window { return r.window }

// at returns the bucket for instant now, rotating it in if needed, or nil
// if now is older than what the bucket's slot already holds. The common
// case, now in the newest bucket's interval, costs one load and no
// division.
func (r *Rolling) at(now time.Duration) *bucket {
	if i, ok := r.ring.Hint(now); ok {
		return r.buckets[i]
	}
	if i := r.ring.SlotOf(r.ring.Epoch(now), r.rotateIn); i >= 0 {
		return r.buckets[i]
	}
	return nil
}

// rotateIn empties the bucket in slot i for interval ep, for the ring's
// rotate, creating it on the slot's first use. r.ring's mutex is held.
func (r *Rolling) rotateIn(i int, ep int64) {
	b := r.buckets[i]
	if b == nil {
		b = new(bucket)
		r.buckets[i] = b
	}
	if r.withLat {
		r.rotating(b, i, ep)
	}
	r.empty(b)
	if r.sums != nil {
		r.rotated(i)
	}
}

// empty moves b's counts and latencies into the cumulative ones and clears
// the rest of it. r.ring's mutex must be held.
func (r *Rolling) empty(b *bucket) {
	for e := range b.counts {
		if n := b.counts[e].Swap(0); n != 0 {
			r.folded[e].Add(n)
		}
	}
	b.max.Store(0)
	b.bare.Store(0)
	if l := b.lat.Load(); !l.empty() {
		l.moveTo(r.totals())
	}
}

// totals returns the ring's cumulative latencies, creating them if needed.
// r.ring's mutex must be held.
func (r *Rolling) totals() *latencyTotals {
	if r.foldedLat == nil {
		r.foldedLat = new(latencyTotals)
	}
	return r.foldedLat
}

// NoLatency, as a latency passed to Record, records none.
const NoLatency time.Duration = -1

// Record counts one call at instant now, with a single bucket lookup: every
// event in events (in the window and cumulatively), and, on a ring created
// with latency, the run latency and the total latency. A negative latency
// (NoLatency) is not recorded: pass NoLatency as run for a call whose Run did
// not return before the caller was answered. A call at an instant older than
// the window's oldest bucket counts cumulatively only (Cumulative,
// CumulativeLatency), as if its bucket had already left the window.
func (r *Rolling) Record(now time.Duration, events EventSet, run, total time.Duration) {
	b := r.at(now)
	if b == nil {
		r.late(events, run, total)
		return
	}
	l := b.lat.Load()
	if l == nil {
		l = r.firstLatencies(b, now, run, total)
	}
	if l != nil {
		switch {
		case run >= 0 && run == total:
			l.same.record(int64(run))
		case run >= 0:
			apart(&l.run).record(int64(run))
			if total >= 0 {
				apart(&l.total).record(int64(total))
			}
		case total >= 0:
			apart(&l.total).record(int64(total))
		}
	}
	// The events go in after the latencies (a Record without one counts in
	// bare): a snapshot that finds b's writes unchanged has seen every
	// latency of the Records that completed (see windowsum.go).
	b.add(events)
}

// firstLatencies returns the latencies for Record to record a call's into,
// when b, the bucket at found for instant now, has none yet: a call with a
// latency creates b's, on a ring with
// latency; a call without, or a ring without latency, creates nothing and
// gets nil. Kept out of line, as create is, so that Record's common path
// stays a load, a test and a branch.
//
// The slot's interval is the call's, unless a rotation or Reset came between:
// then the latencies go where a writer delayed as long puts them, in the
// slot's new interval, or, after a Reset, cumulatively only (and firstLatencies
// returns nil, having recorded them).
//
//go:noinline
func (r *Rolling) firstLatencies(b *bucket, now, run, total time.Duration) *latencies {
	if (run < 0 && total < 0) || !r.newLatencies(b) {
		return nil
	}
	if r.ring.Holds(r.ring.Slot(r.ring.Epoch(now))) == ring.Empty {
		r.late(0, run, total)
		return nil
	}
	return b.lat.Load()
}

// newLatencies installs b's latencies, unless another writer just did, and
// reports whether b has them: false, and nothing created, on a ring
// without latency.
func (r *Rolling) newLatencies(b *bucket) bool {
	if !r.withLat {
		return false
	}
	b.lat.CompareAndSwap(nil, new(latencies))
	return true
}

// add counts every event in events in b, or, for no event, one in bare.
func (b *bucket) add(events EventSet) {
	if events == 0 {
		b.bare.Add(1)
		return
	}
	for s := uint32(events); s != 0; s &= s - 1 {
		b.counts[bits.TrailingZeros32(s)].Add(1)
	}
}

// late counts events too old for any bucket, and on a ring with latency
// their latencies (NoLatency: none), cumulatively only: a call whose
// instant has left the window still counts since creation.
func (r *Rolling) late(events EventSet, run, total time.Duration) {
	for s := uint32(events); s != 0; s &= s - 1 {
		r.folded[bits.TrailingZeros32(s)].Add(1)
	}
	if r.withLat && (run >= 0 || total >= 0) {
		r.ring.Lock()
		r.totals().record(run, total)
		r.ring.Unlock()
	}
}

// ObserveMax raises the rolling maximum (for example peak concurrency) to v
// if v is larger.
func (r *Rolling) ObserveMax(now time.Duration, v int64) {
	if b := r.at(now); b != nil {
		ring.Raise(&b.max, v)
	}
}

// Counts returns the event counts in the window that ends at now. It reads
// every event's counter in every bucket of the window; a caller that needs
// only a few events reads less with CountsOf or Count.
func (r *Rolling) Counts(now time.Duration) Counts {
	var c Counts
	cur := r.ring.Epoch(now)
	for i := range r.buckets {
		if !r.ring.Live(i, cur) {
			continue
		}
		b := r.buckets[i]
		for e := range c {
			c[e] += b.counts[e].Load()
		}
	}
	return c
}

// CountsOf returns the counts of the events in set in the window that ends
// at now, and 0 for every other event: Counts(now) with the events outside
// set zeroed, reading only set's counters (a retry budget reads the events
// Counts.Calls needs). Bits of set that stand for no event (NumEvents and above)
// are ignored: no such event is ever counted.
func (r *Rolling) CountsOf(now time.Duration, set EventSet) Counts {
	var c Counts
	set &= allEvents
	cur := r.ring.Epoch(now)
	for i := range r.buckets {
		if !r.ring.Live(i, cur) {
			continue
		}
		b := r.buckets[i]
		for s := uint32(set); s != 0; s &= s - 1 {
			e := bits.TrailingZeros32(s)
			c[e] += b.counts[e].Load()
		}
	}
	return c
}

// Count returns the count of event e in the window that ends at now,
// Counts(now)[e], reading one counter per bucket. An e that is no event
// (NumEvents or above) counts 0: no such event is ever counted.
func (r *Rolling) Count(now time.Duration, e Event) int64 {
	if e >= NumEvents {
		return 0
	}
	var n int64
	cur := r.ring.Epoch(now)
	for i := range r.buckets {
		if r.ring.Live(i, cur) {
			n += r.buckets[i].counts[e].Load()
		}
	}
	return n
}

// Cumulative returns the event counts since the ring was created; Reset does
// not clear them. It takes the ring's mutex (as rotation does, once per
// bucket interval), so successive readings never decrease.
func (r *Rolling) Cumulative() Counts {
	var c Counts
	r.ring.Lock()
	defer r.ring.Unlock()
	for e := range c {
		c[e] = r.folded[e].Load()
	}
	for _, b := range r.buckets {
		if b == nil {
			continue
		}
		for e := range c {
			c[e] += b.counts[e].Load()
		}
	}
	return c
}

// Reset empties the window (cumulative counts are kept).
func (r *Rolling) Reset() {
	r.ring.Lock()
	defer r.ring.Unlock()
	r.ring.Clear()
	for _, b := range r.buckets {
		if b != nil {
			r.empty(b)
		}
	}
	if r.sums != nil {
		r.sums.reset()
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

// Snapshot summarises the window that ends at now, with the cumulative
// counts read in the same pass under the ring's mutex (as Cumulative takes
// it). On a ring with latency it reads the window's running sums, and the
// newest bucket's bins (one pass) only if a Record reached it since
// the last snapshot, never the other buckets' bins: call it on a schedule
// (the stream does, every 500 ms), not per request.
func (r *Rolling) Snapshot(now time.Duration) Snapshot {
	s := Snapshot{Window: r.window}
	cur := r.ring.Epoch(now)
	r.ring.Lock()
	defer r.ring.Unlock()
	for e := range s.Cumulative {
		s.Cumulative[e] = r.folded[e].Load()
	}
	w := r.sums
	for i, b := range r.buckets {
		if b == nil {
			continue // never used: no writes, as its mark says if it has one
		}
		live := r.ring.Live(i, cur)
		writes := b.bare.Load()
		for e := range s.Counts {
			n := b.counts[e].Load()
			writes += n
			s.Cumulative[e] += n
			if live {
				s.Counts[e] += n
			}
		}
		if live {
			s.Max = max(s.Max, b.max.Load())
		}
		if w != nil {
			w.marks[i].seen = writes // b.writes(), read with the counts
		}
	}
	if r.withLat {
		s.Run, s.Total = r.windowLatency(cur)
	}
	return s
}
