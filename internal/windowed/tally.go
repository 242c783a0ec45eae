package windowed

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/internal/ring"
	"github.com/bulwark-go/bulwark/metrics"
)

// Tally counts the events of one set over a sliding window of buckets: what
// a metrics.Rolling's window counts of those events, and nothing else (no
// other event, no cumulative count, maximum or latency), in one counter per
// event of the set in each bucket. A circuit breaker's health window, four
// events in ten buckets, takes 592 bytes as a Tally
// (TestTallyAllocatesWhatItUses) and 3,072 as a Rolling once every slot was
// used. Recording is lock-free and allocation free; buckets rotate lazily,
// as a Rolling's do (the same code, package ring, rotates both). An event
// whose instant lies a whole window behind the newest write is not counted.
// Tally is safe for concurrent use.
type Tally struct {
	ring ring.Ring // the buckets' intervals
	set  metrics.EventSet
	k    int      // counters per bucket: set.Len()
	pos  [32]int8 // pos[e]: event e's counter in a bucket, for e in set
	// counts holds bucket i's counters at [i*k, i*k+k), in event order, in
	// lines of their own (see ring.Lines). Buckets share lines with each other:
	// only the newest is written.
	counts []atomic.Int64
}

// NewTally returns a tally of the events in set over w. Bits of set that
// stand for no event (NumEvents and above) are ignored; a set of no event is
// an error.
func NewTally(w metrics.Window, set metrics.EventSet) (*Tally, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	set &= allEvents
	if set == 0 {
		return nil, fmt.Errorf("%w: a Tally needs at least one event", metrics.ErrInvalidConfig)
	}
	t := &Tally{ring: ring.New(w.BucketWidth(), w.Buckets), set: set, k: set.Len()}
	for e := range metrics.NumEvents {
		if set.Has(e) {
			t.pos[e] = int8((set & (1<<e - 1)).Len()) // the events of set before e
		}
	}
	t.counts = ring.Lines(w.Buckets * t.k)
	return t, nil
}

// Record counts every event of events that is in the tally's set at
// instant now; the others are ignored. A call at an instant older than the
// window's oldest bucket is not counted.
func (t *Tally) Record(now time.Duration, events metrics.EventSet) {
	i, ok := t.ring.Hint(now)
	if !ok {
		if i = t.ring.SlotOf(t.ring.Epoch(now), t.rotateIn); i < 0 {
			return
		}
	}
	base := i * t.k
	for s := uint32(events & t.set); s != 0; s &= s - 1 {
		t.counts[base+int(t.pos[bits.TrailingZeros32(s)&31])].Add(1)
	}
}

// allEvents is the set of every event.
const allEvents metrics.EventSet = 1<<metrics.NumEvents - 1

// rotateIn empties the bucket in slot i, for the ring's rotation. The
// ring's mutex is held.
func (t *Tally) rotateIn(i int, _ int64) {
	for j := i * t.k; j < (i+1)*t.k; j++ {
		t.counts[j].Store(0)
	}
}

// Counts returns the counts of the tally's events in the window that ends
// at now, and 0 for every other event.
func (t *Tally) Counts(now time.Duration) metrics.Counts {
	var c metrics.Counts
	cur := t.ring.Epoch(now)
	for i := range t.ring.Len() {
		if !t.ring.Live(i, cur) {
			continue
		}
		j := i * t.k
		for s := uint32(t.set); s != 0; s &= s - 1 {
			c[bits.TrailingZeros32(s)] += t.counts[j].Load()
			j++
		}
	}
	return c
}

// Reset empties the window. A circuit breaker calls it on closing so that
// old failures cannot reopen it. Reset may lose, or keep, an event recorded
// at the same moment.
func (t *Tally) Reset() {
	t.ring.Lock()
	defer t.ring.Unlock()
	t.ring.Clear()
	for j := range t.counts {
		t.counts[j].Store(0)
	}
}
