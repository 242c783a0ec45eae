package metrics

import (
	"time"

	"github.com/bulwark-go/bulwark/internal/ring"
)

// The window's running sums: a ring with latency keeps, beside its buckets,
// the sum of the latency histograms of its sealed buckets (every bucket but
// the newest that a rotation or a snapshot has added), so that a snapshot
// reads that sum and the newest bucket instead of merging every bucket's
// bins. A rotation seals the bucket it demotes (one pass over its bins) and
// subtracts the bucket it empties (another), so the sums cost nothing per
// call and a bounded pass per bucket interval.
//
// A writer delayed across a rotation may still record into a sealed bucket.
// Each sealed bucket keeps a mark of what the sums hold of it: the bucket's
// writes (its counts and bare, see bucket.writes) read before its
// histograms, and per histogram the records counted and their sum. A Record
// adds its latencies first and then its events (or bare), so a bucket whose
// writes still equal its mark has received no latency since it was sealed,
// but from Records that have not returned yet. A snapshot reads every
// bucket's counts anyway: it compares each live sealed bucket's writes with
// its mark, touching none of its histograms; subtraction compares the
// records it reads with the mark's count. On a difference the sums are
// rebuilt from the buckets (a full merge, as rare as such late writes). All
// of it is guarded by the ring's mutex.
//
// A ring creates its sums at the first rotation that finds latencies in a
// bucket other than the one it rotates in: until then at most one bucket
// holds latencies (but for writers racing a rotation), and a snapshot reads
// that bucket alone. New sums seal every bucket but the newest and the one
// being emptied, as the rotations before would have: typically none holds
// latencies yet, and the rotation then seals the newest, which does.

// numBlocks is the number of blocks of subBuckets bins: the sums keep a
// total per block so that a percentile walk skips empty blocks.
const numBlocks = numBins / subBuckets

// binSum is a histAccumulator that also keeps its block totals.
type binSum struct {
	acc    histAccumulator
	blocks [numBlocks]int64
}

// histMark is what a binSum holds of one histogram: the records counted
// and their sum (read before the bins).
type histMark struct{ n, sum int64 }

// sealMark is a bucket's part in the sums: sealed when its histograms were
// added, with the bucket's writes read before them and a mark for each
// histogram (same, run, total). seen is the bucket's writes as the snapshot
// under way read them, with its counts.
type sealMark struct {
	sealed       bool
	writes, seen int64
	h            [3]histMark
}

// windowSums is a ring's running sums (see above).
type windowSums struct {
	same       binSum
	run, total *binSum // created when a sealed bucket first has such latencies
	marks      []sealMark
	newest     int  // slot of the newest bucket; -1 when none
	valid      bool // false: a late write made the sums differ from the marks
	gen        uint64
	memo       memo
}

// memo is the last latencies windowLatency computed, and what they were
// computed from: the sums' generation (gen counts their changes), the
// interval, and the unsealed bucket read beside the sums with its writes
// (read before its histograms, as a seal reads them). A snapshot of a window
// in which nothing changed since returns them without reading the bucket's
// histograms.
type memo struct {
	ok         bool
	gen        uint64
	cur        int64
	extra      int
	writes     int64
	run, total Latency
}

// startSums returns the ring's sums, creating them (see above) if a bucket
// other than slot i, the one a rotation empties, holds latencies; nil, and
// nothing created, if none does.
func (r *Rolling) startSums(i int) *windowSums {
	newest, newestEp := -1, int64(ring.Empty)
	found := false
	for j := range r.buckets {
		b := r.buckets[j]
		if j != i && b.latencies() != nil {
			found = true
		}
		if ep := r.ring.Holds(j); ep != ring.Empty && (newest < 0 || ep > newestEp) {
			newest, newestEp = j, ep // as rotating tracks it: the latest interval
		}
	}
	if !found {
		return nil
	}
	w := &windowSums{marks: make([]sealMark, len(r.buckets)), newest: newest, valid: true}
	for j := range r.buckets {
		if j != i && j != newest {
			w.seal(r.buckets[j], j)
		}
	}
	r.sums = w
	return w
}

// hists returns a bucket's three histograms (nil for one not created, and
// all three for a nil l).
func (l *latencies) hists() [3]*Histogram {
	if l == nil {
		return [3]*Histogram{}
	}
	return [3]*Histogram{&l.same, l.run.Load(), l.total.Load()}
}

// sumFor returns the binSum of histogram k (0 same, 1 run, 2 total),
// creating it when create is set; nil when it does not exist.
func (w *windowSums) sumFor(k int, create bool) *binSum {
	p := &w.run
	switch k {
	case 0:
		return &w.same
	case 2:
		p = &w.total
	}
	if *p == nil && create {
		*p = new(binSum)
	}
	return *p
}

// add adds h to s and returns what it added. The sum is read before the
// bins: a record whose sum the mark holds is then in the bins too.
func (s *binSum) add(h *Histogram) histMark {
	sum, empty := h.loadSum()
	if empty {
		return histMark{}
	}
	m := histMark{sum: sum}
	for i := range h.bins {
		if c := h.bins[i].Load(); c != 0 {
			v := int64(min(c, binMax))
			s.acc.bins[i] += v
			s.blocks[i/subBuckets] += v
			m.n += v
		}
	}
	s.acc.addSum(m.sum)
	return m
}

// sub subtracts h, whose mark is m, from s, and reports whether h held
// exactly what m says (records only ever add, so equal counts mean equal
// bins). A saturated sum cannot be subtracted: it reports false.
func (s *binSum) sub(h *Histogram, m histMark) bool {
	if m.sum < 0 || s.acc.sum < 0 {
		return false
	}
	var n int64
	for i := range h.bins {
		if c := h.bins[i].Load(); c != 0 {
			v := int64(min(c, binMax))
			s.acc.bins[i] -= v
			s.blocks[i/subBuckets] -= v
			n += v
		}
	}
	s.acc.sum -= m.sum
	return n == m.n
}

// seal adds bucket b, in slot i, to the sums, its writes read first.
func (w *windowSums) seal(b *bucket, i int) {
	w.gen++
	m := &w.marks[i]
	m.sealed = true
	m.writes = b.writes()
	for k, h := range b.latencies().hists() {
		m.h[k] = histMark{}
		if h != nil {
			m.h[k] = w.sumFor(k, true).add(h)
		}
	}
}

// unseal subtracts bucket b, in slot i, from the sums, invalidating them if
// it holds more than its mark says (a late write: what it holds is then not
// what was added). A histogram that was empty when sealed added nothing and
// subtracts nothing.
func (w *windowSums) unseal(b *bucket, i int) {
	w.gen++
	m := &w.marks[i]
	m.sealed = false
	if !w.valid {
		return
	}
	for k, h := range b.latencies().hists() {
		if m.h[k] == (histMark{}) {
			continue
		}
		if s := w.sumFor(k, false); h == nil || s == nil || !s.sub(h, m.h[k]) {
			w.valid = false
			return
		}
	}
}

// rotating is called by rotate on a ring with latency, under the ring's
// mutex, before it empties b, the bucket in slot i, for interval ep.
func (r *Rolling) rotating(b *bucket, i int, ep int64) {
	w := r.sums
	if w == nil {
		if w = r.startSums(i); w == nil {
			return
		}
	}
	if w.marks[i].sealed {
		w.unseal(b, i)
	}
	if w.newest >= 0 && w.newest != i && r.ring.Holds(w.newest) > ep {
		return // an older interval: sealed (empty) once emptied, see rotated
	}
	if w.newest >= 0 && w.newest != i && w.valid {
		w.seal(r.buckets[w.newest], w.newest) // demoted: no longer the newest
	}
	w.newest = i
}

// rotated is called by rotate, on a ring with sums, once b, in slot i, is
// emptied: a bucket that is not the newest is sealed, with the nothing it
// holds (no writes: a writer racing the rotation then shows).
func (r *Rolling) rotated(i int) {
	if w := r.sums; w.newest != i {
		w.marks[i] = sealMark{sealed: true}
	}
}

// reset empties the sums, as Reset empties every bucket.
func (w *windowSums) reset() {
	w.clear()
	w.newest = -1
}

// clear zeroes the sums and unseals every bucket.
func (w *windowSums) clear() {
	w.same = binSum{}
	if w.run != nil {
		*w.run = binSum{}
	}
	if w.total != nil {
		*w.total = binSum{}
	}
	clear(w.marks)
	w.valid = true
	w.gen++
}

// rebuild makes the sums those of every live bucket but the newest.
func (r *Rolling) rebuild(cur int64) {
	w := r.sums
	w.clear()
	for i := range r.buckets {
		if i != w.newest && r.ring.Live(i, cur) {
			w.seal(r.buckets[i], i)
		}
	}
}

// windowLatency returns the run and total latencies of the window ending
// in interval cur, given the buckets' writes in their marks' seen (Snapshot reads them
// with the counts, before). r.ring's mutex must be held.
func (r *Rolling) windowLatency(cur int64) (run, total Latency) {
	w := r.sums
	if w == nil {
		return r.unsummed(cur)
	}
	for i := range r.buckets {
		if !w.valid {
			break
		}
		b := r.buckets[i]
		switch {
		case !w.marks[i].sealed:
		case !r.ring.Live(i, cur):
			w.unseal(b, i) // out of the window: it leaves the sums
		case w.marks[i].seen != w.marks[i].writes:
			w.valid = false // a late write
		}
	}
	if !w.valid {
		r.rebuild(cur)
	}
	extra := -1
	for i := range r.buckets {
		if !w.marks[i].sealed && r.ring.Live(i, cur) {
			if extra >= 0 {
				return r.mergeLive(cur) // two unsealed live buckets: rare
			}
			extra = i
		}
	}
	m := &w.memo
	var writes int64
	if extra >= 0 {
		writes = w.marks[extra].seen
	}
	if m.ok && m.gen == w.gen && m.cur == cur && m.extra == extra && m.writes == writes {
		return m.run, m.total
	}
	var hs [3]*Histogram
	if extra >= 0 {
		hs = r.buckets[extra].latencies().hists()
	}
	var hb [3]histBlocks
	*m = memo{ok: true, gen: w.gen, cur: cur, extra: extra, writes: writes}
	m.run, m.total = latencyOf(w, hs, &hb)
	return m.run, m.total
}

// unsummed is windowLatency for a ring without sums: at most one live
// bucket holds latencies, read alone, unless writers raced a rotation
// (then every live bucket is merged).
func (r *Rolling) unsummed(cur int64) (run, total Latency) {
	var l *latencies
	for i := range r.buckets {
		if bl := r.buckets[i].latencies(); bl != nil && r.ring.Live(i, cur) {
			if l != nil {
				return r.mergeLive(cur)
			}
			l = bl
		}
	}
	var hb [3]histBlocks
	return latencyOf(nil, l.hists(), &hb)
}

// latencyOf returns the run and total latencies of the sums w (nil: none)
// and the histograms hs (same, run and total; nil: none), reading each
// histogram's block totals into hb.
func latencyOf(w *windowSums, hs [3]*Histogram, hb *[3]histBlocks) (run, total Latency) {
	var runs, totals merged
	if w != nil {
		runs.sums = [2]*binSum{&w.same, w.run}
		totals.sums = [2]*binSum{&w.same, w.total}
	}
	for k, h := range hs {
		if h == nil {
			continue
		}
		hb[k] = blocksOf(h) // one pass each: same serves both phases
		switch k {
		case 0:
			runs.addHist(h, &hb[k])
			totals.addHist(h, &hb[k])
		case 1:
			runs.addHist(h, &hb[k])
		default:
			totals.addHist(h, &hb[k])
		}
	}
	run = runs.latency()
	if (w == nil || w.run == nil && w.total == nil) && hs[1] == nil && hs[2] == nil {
		return run, run // every call's run and total latencies were equal
	}
	return run, totals.latency()
}

// histBlocks is a histogram's block totals and sum, read in one pass.
type histBlocks struct {
	blocks [numBlocks]int64
	sum    int64
	empty  bool
}

// blocksOf reads h's block totals.
func blocksOf(h *Histogram) histBlocks {
	var hb histBlocks
	if hb.sum, hb.empty = h.loadSum(); hb.empty {
		return hb
	}
	for b := range hb.blocks {
		var c uint64
		var any uint32
		for i := b * subBuckets; i < (b+1)*subBuckets; i++ {
			v := h.bins[i].Load()
			c += uint64(v)
			any |= v
		}
		if any > binMax { // a writer racing a full bin's saturation: clamp bin by bin
			c = 0
			for i := b * subBuckets; i < (b+1)*subBuckets; i++ {
				c += uint64(min(h.bins[i].Load(), binMax))
			}
		}
		hb.blocks[b] = int64(c)
	}
	return hb
}

// mergeLive returns the run and total latencies of the window ending in
// interval cur by merging every live bucket's histograms.
func (r *Rolling) mergeLive(cur int64) (Latency, Latency) {
	var run, total histAccumulator
	for i := range r.buckets {
		if r.ring.Live(i, cur) {
			r.buckets[i].latencies().addTo(&run, &total)
		}
	}
	return run.latency(), total.latency()
}

// merged is a latency distribution read from up to two binSums and two
// histograms without copying their bins.
type merged struct {
	sums   [2]*binSum
	hists  [2]*Histogram
	nhists int
	blocks [numBlocks]int64
	sum    histAccumulator // only its sum: see addSum
}

// addHist adds h, whose block totals are hb, to m.
func (m *merged) addHist(h *Histogram, hb *histBlocks) {
	if hb.empty {
		return
	}
	m.hists[m.nhists] = h
	m.nhists++
	for b, c := range hb.blocks {
		m.blocks[b] += c
	}
	m.sum.addSum(hb.sum)
}

// count returns the records in bin i.
func (m *merged) count(i int) int64 {
	var c int64
	for _, s := range m.sums {
		if s != nil {
			c += s.acc.bins[i]
		}
	}
	for _, h := range m.hists[:m.nhists] {
		c += int64(min(h.bins[i].Load(), binMax))
	}
	return c
}

// latency computes the summary, as histAccumulator.latency does for the
// same bins: the same ranks, the same bins, the same arithmetic.
func (m *merged) latency() Latency {
	for _, s := range m.sums {
		if s != nil {
			for b, c := range s.blocks {
				m.blocks[b] += c
			}
			m.sum.addSum(s.acc.sum)
		}
	}
	var n int64
	for _, c := range m.blocks {
		n += c
	}
	l := Latency{Count: n}
	if n == 0 {
		return l
	}
	if m.sum.sum >= 0 {
		l.Mean = time.Duration(m.sum.sum / n)
	} else {
		l.Mean = time.Duration(m.estimatedSum() / float64(n))
	}
	bin, below := 0, int64(0)
	for qi, q := range quantiles {
		rank := rankOf(q, n)
		var c int64
		for {
			for bin%subBuckets == 0 && bin < numBins-subBuckets && below+m.blocks[bin/subBuckets] <= rank {
				below += m.blocks[bin/subBuckets]
				bin += subBuckets
			}
			if c = m.count(bin); below+c > rank || bin == numBins-1 {
				break
			}
			below += c
			bin++
		}
		// Bounds that only a writer racing this read can break: the
		// newest bucket's bins are read again here, after its block totals.
		l.Percentiles[qi] = inBin(bin, min(max(rank-below, 0), max(c-1, 0)), max(c, 1))
	}
	return l
}

// estimatedSum is histAccumulator.estimatedSum for m's bins, added in the
// same order.
func (m *merged) estimatedSum() float64 {
	var total float64
	for b, bc := range m.blocks {
		if bc == 0 {
			continue
		}
		for i := b * subBuckets; i < (b+1)*subBuckets; i++ {
			if c := m.count(i); c != 0 {
				lo, width := binBounds(i)
				total += float64(c) * (float64(lo) + float64(width)/2)
			}
		}
	}
	return total
}
