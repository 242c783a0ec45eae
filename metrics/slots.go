package metrics

import (
	"math/bits"
	"sync/atomic"
)

// A ring's latencies are kept per phase, not per bucket: a slotHist holds
// one histogram for each bucket slot, and stores them octave by octave
// (subBuckets bins, a power of two of values each), an octave being
// allocated, for every slot at once, the first time a latency falls in it.
// Latencies spread over a few powers of two (2 to 4 ms and 4 to 8 ms, say)
// so cost a few octaves, 128 bytes each per slot, instead of the 1,280
// bins (5 KiB) per bucket of a dense histogram; the bins and their
// precision are the dense Histogram's. An octave, once allocated, is kept
// for the ring's life: recording allocates nothing after the first
// latency of each octave.

// slotHist is one phase's histograms, one per bucket slot of a ring: the
// bins. The sum of each slot's latencies is in its bucket (bucket.sums),
// on the line the call writes its counts on.
type slotHist struct {
	have  atomic.Uint64 // bit o: oct[o] is allocated
	oct   [octSlots]atomic.Pointer[[]atomic.Uint32]
	slots int
}

// octSlots is the length of slotHist.oct: numOctaves rounded up to a power
// of two (TestOctSlots), so that indexing it by octave&(octSlots-1) needs no bounds check
// on the call path.
const octSlots = 64

// record adds one observation of v ≥ 0 nanoseconds (clamped below 2^44) to
// slot's histogram, whose sum is sum, as Histogram.record does.
// (Rolling.Record has its fast path inline.)
func (h *slotHist) record(slot int, sum *atomic.Int64, v int64) {
	v = min(v, maxValue)
	i := binOf(v)
	o := h.oct[i>>subBits&(octSlots-1)].Load()
	if o == nil {
		o = h.grow(i >> subBits)
	}
	count(octaveBin(o, slot, i), sum, v)
}

// octaveBin returns the counter of bin i, whose octave is o, in slot's
// histogram.
func octaveBin(o *[]atomic.Uint32, slot, i int) *atomic.Uint32 {
	return &(*o)[slot<<subBits|i&(subBuckets-1)]
}

// grow allocates octave o for every slot, unless another writer just did.
// Kept out of line so that record stays small.
//
//go:noinline
func (h *slotHist) grow(o int) *[]atomic.Uint32 {
	// The bit goes first: a reader that sees it and no octave yet skips
	// it, while an octave that holds a record always has its bit.
	h.have.Or(1 << o)
	bins := make([]atomic.Uint32, h.slots*subBuckets)
	h.oct[o].CompareAndSwap(nil, &bins)
	return h.oct[o].Load()
}

// empty reports whether slot's histogram, whose sum is sum, holds nothing:
// a record goes to bin 0 (values up to 0 ns) or makes the sum nonzero.
func (h *slotHist) empty(slot int, sum *atomic.Int64) bool {
	if sum.Load() != 0 {
		return false
	}
	o := h.oct[0].Load()
	return o == nil || (*o)[slot<<subBits].Load() == 0
}

// addTo adds slot's histogram, whose sum is sum, to a.
func (h *slotHist) addTo(slot int, sum *atomic.Int64, a *histAccumulator) {
	if h.empty(slot, sum) {
		return
	}
	for have := h.have.Load(); have != 0; have &= have - 1 {
		o := bits.TrailingZeros64(have)
		p := h.oct[o].Load()
		if p == nil {
			continue
		}
		bins := (*p)[slot<<subBits:][:subBuckets]
		var dst *[subBuckets]int64
		for j := range bins {
			if c := bins[j].Load(); c != 0 {
				if dst == nil {
					dst = a.octave(o)
				}
				dst[j] += int64(min(c, binMax))
			}
		}
	}
	a.addSum(sum.Load())
}

// take empties slot's histogram, whose sum is sum, into a, and into also
// when it is not nil. Each bin is swapped out, so a record racing the move
// is counted once, here or in the slot.
func (h *slotHist) take(slot int, sum *atomic.Int64, a, also *histAccumulator) {
	if h.empty(slot, sum) {
		return
	}
	for have := h.have.Load(); have != 0; have &= have - 1 {
		o := bits.TrailingZeros64(have)
		p := h.oct[o].Load()
		if p == nil {
			continue
		}
		bins := (*p)[slot<<subBits:][:subBuckets]
		for j := range bins {
			if c := bins[j].Swap(0); c != 0 {
				n := int64(min(c, binMax))
				a.octave(o)[j] += n
				if also != nil {
					also.octave(o)[j] += n
				}
			}
		}
	}
	n := sum.Swap(0)
	a.addSum(n)
	if also != nil {
		also.addSum(n)
	}
}

// ringLatency holds a ring's run and total latencies in three slotHists,
// so that the common call, whose run and total latencies are equal
// (nothing happened after Run: no fallback, no queue), costs one record
// instead of two. Run is same+run, Total is same+total, exactly. run and
// total are created when first needed (a ring whose calls never differ
// never has them).
type ringLatency struct {
	same       slotHist
	run, total atomic.Pointer[slotHist]

	// folded holds the latencies rotation and Reset moved out of the
	// slots, as Rolling.folded does the counts (see CumulativeLatency).
	// Guarded by the ring's mutex.
	foldedRun, foldedTotal histAccumulator
}

// apart returns the slotHist in p, creating it if needed.
func (l *ringLatency) apart(p *atomic.Pointer[slotHist]) *slotHist {
	if h := p.Load(); h != nil {
		return h
	}
	return l.create(p)
}

// create is apart's first use: it installs a new slotHist in p, unless
// another writer just did. Kept out of line so that apart is inlined.
//
//go:noinline
func (l *ringLatency) create(p *atomic.Pointer[slotHist]) *slotHist {
	p.CompareAndSwap(nil, &slotHist{slots: l.same.slots})
	return p.Load()
}

// The phases' sums in bucket.sums.
const (
	sumSame = iota
	sumRun
	sumTotal
)

// recordApart records in b a call's run and total latencies that are not
// equal (a negative one is not recorded). Rolling.Record records equal
// ones in same itself.
func (l *ringLatency) recordApart(b *bucket, run, total int64) {
	switch {
	case run >= 0:
		l.apart(&l.run).record(b.slot, &b.sums[sumRun], run)
		if total >= 0 {
			l.apart(&l.total).record(b.slot, &b.sums[sumTotal], total)
		}
	case total >= 0:
		l.apart(&l.total).record(b.slot, &b.sums[sumTotal], total)
	}
}

// addTo adds b's run and total latencies to run and total. same is read
// once, into same, which the caller adds to both when it has read every
// bucket (see Rolling.Snapshot).
func (l *ringLatency) addTo(b *bucket, same, run, total *histAccumulator) {
	l.same.addTo(b.slot, &b.sums[sumSame], same)
	if h := l.run.Load(); h != nil {
		h.addTo(b.slot, &b.sums[sumRun], run)
	}
	if h := l.total.Load(); h != nil {
		h.addTo(b.slot, &b.sums[sumTotal], total)
	}
}

// fold moves b's latencies into the cumulative ones. The ring's mutex must
// be held.
func (l *ringLatency) fold(b *bucket) {
	l.same.take(b.slot, &b.sums[sumSame], &l.foldedRun, &l.foldedTotal)
	if h := l.run.Load(); h != nil {
		h.take(b.slot, &b.sums[sumRun], &l.foldedRun, nil)
	}
	if h := l.total.Load(); h != nil {
		h.take(b.slot, &b.sums[sumTotal], &l.foldedTotal, nil)
	}
}
