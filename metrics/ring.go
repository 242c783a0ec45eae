package metrics

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/internal/cacheline"
)

// emptyEpoch marks a bucket slot that holds no interval.
const emptyEpoch = math.MinInt64

// The ring's current-bucket hint, cur, packs the newest bucket's epoch with
// its slot index, so that a write finds its bucket with one load, a multiply
// and a compare instead of a 64-bit division:
//
//	bits 0-9    slot index (MaxBuckets ≤ 1024)
//	bit  10     valid
//	bits 11-63  epoch (signed)
//
// Only epochs whose interval starts within ±2^62 ns (±146 years) of the
// clock's origin are published, so that now - start never overflows into a
// false match; instants beyond take the division path.
const (
	curSlotBits        = 10
	curSlotMask        = 1<<curSlotBits - 1
	curValid    uint64 = 1 << curSlotBits
	curShift           = curSlotBits + 1
	curMaxStart        = 1 << 62
)

// ring maps instants to the slots of a ring of bucket intervals and rotates
// a slot to a new interval: the one implementation of rotation, for every
// ring type of this package (Rolling, Tally, Peak), each of which keeps its
// buckets itself. A slot's epoch is the interval's number (time / bucket
// width).
//
// A write reads only cur, which a rotation stores last, under mu, after its
// owner emptied the slot's bucket and the slot's epoch was stored: a writer
// that finds its instant in cur's interval (acquire) adds into freshly
// emptied counters. The epochs are read by the writes cur does not serve
// and by readers. A writer that loaded cur just before a rotation or Reset
// of its slot adds into the slot as it is then, as a writer delayed between
// finding its bucket and adding does.
type ring struct {
	width  int64          // bucket width in ns
	maxEp  int64          // largest |epoch| cur may hold (see curMaxStart)
	epochs []atomic.Int64 // the interval each slot holds; emptyEpoch: none
	cur    atomic.Uint64  // hint: the newest bucket (see curSlotBits); 0 when none
	mu     sync.Mutex     // serialises rotation, Reset and the owner's other guarded state
}

// rotator is what a ring rotates: the owner of its buckets.
type rotator interface {
	// rotateIn empties the bucket in slot i, which is to hold interval ep.
	// The ring's mu is held.
	rotateIn(i int, ep int64)
}

// makeRing returns a ring of w's buckets, every slot empty.
func makeRing(w Window) ring {
	width := int64(w.BucketWidth())
	epochs := make([]atomic.Int64, w.Buckets)
	for i := range epochs {
		epochs[i].Store(emptyEpoch)
	}
	return ring{width: width, maxEp: curMaxStart / width, epochs: epochs}
}

// lines returns n counters in whole cache lines: the allocator rounds a
// size of whole lines to a class of whole lines, so the array starts on a
// line, and the counters share no line with another object (a write on one
// core does not invalidate a line another ring's writers use).
func lines(n int) []atomic.Int64 {
	perLine := cacheline.Size / 8
	return make([]atomic.Int64, n, (n+perLine-1)/perLine*perLine)
}

// raise raises m to v if v is larger.
func raise(m *atomic.Int64, v int64) {
	for {
		cur := m.Load()
		if v <= cur || m.CompareAndSwap(cur, v) {
			return
		}
	}
}

// hint returns the slot of instant now and true if now lies in the newest
// bucket's interval, else false: one load and no division.
func (g *ring) hint(now time.Duration) (int, bool) {
	c := g.cur.Load()
	ep := int64(c) >> curShift
	// Unsigned: one compare tests start <= now < start+width.
	return int(c & curSlotMask), c&curValid != 0 && uint64(int64(now)-ep*g.width) < uint64(g.width)
}

// slotOf returns the slot of interval ep, rotating it in with o if needed,
// or -1 if ep is older than what the slot already holds.
func (g *ring) slotOf(ep int64, o rotator) int {
	i := g.slot(ep)
	if g.epochs[i].Load() == ep {
		return i
	}
	return g.rotate(i, ep, o)
}

// slot returns the slot that holds interval ep when it is in the ring.
func (g *ring) slot(ep int64) int {
	n := int64(len(g.epochs))
	return int((ep%n + n) % n)
}

// rotate makes slot i, the slot of interval ep, hold ep, unless it already
// holds a later interval (then it returns -1).
func (g *ring) rotate(i int, ep int64, o rotator) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch cur := g.epochs[i].Load(); {
	case cur == ep:
		return i
	case cur > ep:
		return -1
	}
	o.rotateIn(i, ep)
	g.epochs[i].Store(ep)
	switch c := g.cur.Load(); {
	case ep >= -g.maxEp && ep <= g.maxEp && (c&curValid == 0 || int64(c)>>curShift < ep):
		g.cur.Store(uint64(ep)<<curShift | curValid | uint64(i))
	case c&curValid != 0 && int(c&curSlotMask) == i:
		g.cur.Store(0) // it named the interval the slot held: no longer there
	}
	return i
}

// clear empties every slot, for Reset: the owner empties the buckets. g.mu
// must be held.
func (g *ring) clear() {
	g.cur.Store(0)
	for i := range g.epochs {
		g.epochs[i].Store(emptyEpoch)
	}
}

// epoch returns the number of the bucket interval holding now, rounding
// down so that instants before the clock's origin work too.
func (g *ring) epoch(now time.Duration) int64 {
	ep := int64(now) / g.width
	if now < 0 && int64(now)%g.width != 0 {
		ep--
	}
	return ep
}

// live reports whether slot i holds an interval in the window ending at
// epoch cur.
func (g *ring) live(i int, cur int64) bool {
	ep := g.epochs[i].Load()
	return ep <= cur && ep > cur-int64(len(g.epochs))
}
