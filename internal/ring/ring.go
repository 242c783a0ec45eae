// Package ring maps instants to the slots of a ring of bucket intervals and
// rotates a slot to a new interval: the one implementation of rotation, for
// every windowed type of bulwark (metrics.Rolling, and windowed's Tally and
// Peak), each of which keeps its buckets itself and empties one when the
// ring asks. It knows nothing of what a bucket holds.
package ring

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/internal/cacheline"
)

// Empty is the epoch of a slot that holds no interval.
const Empty = math.MinInt64

// The ring's current-bucket hint, cur, packs the newest bucket's epoch with
// its slot index, so that a write finds its bucket with one load, a multiply
// and a compare instead of a 64-bit division:
//
//	bits 0-9    slot index (metrics.MaxBuckets ≤ 1024)
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

// Ring is a ring of bucket slots over time. A slot's epoch is the number of
// the interval it holds (time / bucket width).
//
// A write reads only cur, which a rotation stores last, under mu, after the
// owner emptied the slot's bucket and the slot's epoch was stored: a writer
// that finds its instant in cur's interval (acquire) adds into freshly
// emptied counters. The epochs are read by the writes cur does not serve
// and by readers. A writer that loaded cur just before a rotation or Clear
// of its slot adds into the slot as it is then, as a writer delayed between
// finding its bucket and adding does.
type Ring struct {
	width  int64          // bucket width in ns
	maxEp  int64          // largest |epoch| cur may hold (see curMaxStart)
	epochs []atomic.Int64 // the interval each slot holds; Empty: none
	cur    atomic.Uint64  // hint: the newest bucket (see curSlotBits); 0 when none
	mu     sync.Mutex     // serialises rotation, Clear and the owner's other guarded state
}

// New returns a ring of n slots of bucket width width, every slot empty.
// The caller has checked that width > 0 and 0 < n <= 1024 (a valid
// metrics.Window's).
func New(width time.Duration, n int) Ring {
	epochs := make([]atomic.Int64, n)
	for i := range epochs {
		epochs[i].Store(Empty)
	}
	return Ring{width: int64(width), maxEp: curMaxStart / int64(width), epochs: epochs}
}

// Lock locks the ring's mutex, which rotation and Clear hold: the owner
// guards its other state that rotation touches with it.
func (g *Ring) Lock() { g.mu.Lock() }

// Unlock unlocks the ring's mutex.
func (g *Ring) Unlock() { g.mu.Unlock() }

// Len returns the number of slots.
func (g *Ring) Len() int { return len(g.epochs) }

// Hint returns the slot of instant now and true if now lies in the newest
// bucket's interval, else false: one load and no division. A writer calls
// it inline and SlotOf only when it reports false; a method doing both is
// over the inliner's budget, and the call it would cost raised the
// semaphore path from 1,361 to 1,444 instructions (scripts/instructions.sh).
func (g *Ring) Hint(now time.Duration) (int, bool) {
	c := g.cur.Load()
	ep := int64(c) >> curShift
	// Unsigned: one compare tests start <= now < start+width.
	return int(c & curSlotMask), c&curValid != 0 && uint64(int64(now)-ep*g.width) < uint64(g.width)
}

// SlotOf returns the slot of interval ep, rotating it in if needed, or -1
// if ep is older than what the slot already holds. To rotate, it calls
// empty(i, ep) with the mutex held, for the owner to empty the bucket in
// slot i, which is to hold interval ep.
func (g *Ring) SlotOf(ep int64, empty func(i int, ep int64)) int {
	i := g.Slot(ep)
	if g.epochs[i].Load() == ep {
		return i
	}
	return g.rotate(i, ep, empty)
}

// Slot returns the slot that holds interval ep when it is in the ring.
func (g *Ring) Slot(ep int64) int {
	n := int64(len(g.epochs))
	return int((ep%n + n) % n)
}

// rotate makes slot i, the slot of interval ep, hold ep, unless it already
// holds a later interval (then it returns -1).
func (g *Ring) rotate(i int, ep int64, empty func(i int, ep int64)) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch cur := g.epochs[i].Load(); {
	case cur == ep:
		return i
	case cur > ep:
		return -1
	}
	empty(i, ep)
	g.epochs[i].Store(ep)
	switch c := g.cur.Load(); {
	case ep >= -g.maxEp && ep <= g.maxEp && (c&curValid == 0 || int64(c)>>curShift < ep):
		g.cur.Store(uint64(ep)<<curShift | curValid | uint64(i))
	case c&curValid != 0 && int(c&curSlotMask) == i:
		g.cur.Store(0) // it named the interval the slot held: no longer there
	}
	return i
}

// Clear empties every slot, for the owner's Reset: the owner empties the
// buckets. The mutex must be held.
func (g *Ring) Clear() {
	g.cur.Store(0)
	for i := range g.epochs {
		g.epochs[i].Store(Empty)
	}
}

// Epoch returns the number of the bucket interval holding now, rounding
// down so that instants before the clock's origin work too.
func (g *Ring) Epoch(now time.Duration) int64 {
	ep := int64(now) / g.width
	if now < 0 && int64(now)%g.width != 0 {
		ep--
	}
	return ep
}

// Holds returns the interval slot i holds, or Empty.
func (g *Ring) Holds(i int) int64 { return g.epochs[i].Load() }

// Live reports whether slot i holds an interval in the window ending at
// epoch cur.
func (g *Ring) Live(i int, cur int64) bool {
	ep := g.epochs[i].Load()
	return ep <= cur && ep > cur-int64(len(g.epochs))
}

// Lines returns n counters in whole cache lines: the allocator rounds a
// size of whole lines to a class of whole lines, so the array starts on a
// line, and the counters share no line with another object (a write on one
// core does not invalidate a line another ring's writers use).
func Lines(n int) []atomic.Int64 {
	perLine := cacheline.Size / 8
	return make([]atomic.Int64, n, (n+perLine-1)/perLine*perLine)
}

// Raise raises m to v if v is larger.
func Raise(m *atomic.Int64, v int64) {
	for {
		cur := m.Load()
		if v <= cur || m.CompareAndSwap(cur, v) {
			return
		}
	}
}
