package metrics

import (
	"math"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/bulwark-go/bulwark/internal/alloctest"
	"github.com/bulwark-go/bulwark/internal/cacheline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runs and trials are alloctest's, for the tests that size what they keep.
const runs, trials = alloctest.Runs, alloctest.Trials

var (
	allocated   = alloctest.Allocated
	requireSize = alloctest.RequireSize
)

// requireNone checks that what allocated measured over runs is no more
// than the test's other goroutines allocate: not one histogram in all the
// runs.
func requireNone(t *testing.T, bytes, objects float64, what string) {
	t.Helper()
	alloctest.RequireNone(t, bytes, objects, unsafe.Sizeof(Histogram{}), what)
}

// TestRollingAllocatesWhatItUses: a new ring is its struct, its slots'
// epochs and its table of buckets; a slot's first rotation adds the slot's
// bucket, the first latency recorded in a bucket slot adds that slot's
// histogram, and the first rotation that finds latencies in another bucket
// adds the window's running sums. Once every slot was used, a ring without
// latency allocates nothing more, whatever it is given.
func TestRollingAllocatesWhatItUses(t *testing.T) {
	w := DefaultWindow()
	width := w.BucketWidth()
	slots := uintptr(w.Buckets) * (unsafe.Sizeof(atomic.Int64{}) + unsafe.Sizeof((*bucket)(nil)))
	ring := unsafe.Sizeof(Rolling{}) + slots
	bucketSize := unsafe.Sizeof(bucket{})
	lat := unsafe.Sizeof(latencies{})
	sums := unsafe.Sizeof(windowSums{}) + uintptr(w.Buckets)*unsafe.Sizeof(sealMark{})
	rings := make([]*Rolling, 0, 4*trials*runs+2) // kept, so that nothing is freed before it is counted
	newRolling := func(c Contents) *Rolling {
		r, err := NewRolling(w, c)
		require.NoError(t, err)
		rings = append(rings, r)
		return r
	}

	bytes, objects := allocated(func() { newRolling(CountsAndLatencies) })
	assert.InDelta(t, 3, objects, 0.1, "the ring, its epochs and its table of buckets")
	requireSize(t, ring, bytes, "a new ring")

	bytes, objects = allocated(func() {
		r := newRolling(CountsAndLatencies)
		r.Record(0, SetOf(Success), time.Millisecond, time.Millisecond)
		r.Record(width/2, SetOf(Success), 2*time.Millisecond, 2*time.Millisecond)
		r.Snapshot(width / 2)
	})
	assert.InDelta(t, 5, objects, 0.1, "the ring, its epochs, its table, one bucket and its latencies")
	requireSize(t, ring+bucketSize+lat, bytes, "a ring with calls in one bucket")

	bytes, objects = allocated(func() {
		r := newRolling(CountsAndLatencies)
		r.Record(0, SetOf(Success), time.Millisecond, time.Millisecond)
		r.Record(width, SetOf(Success), time.Millisecond, time.Millisecond)
		r.Snapshot(width)
	})
	assert.InDelta(t, 9, objects, 0.1, "the ring, its epochs, its table, two buckets and their latencies, the sums and their marks")
	requireSize(t, ring+2*(bucketSize+lat)+sums, bytes, "a ring with calls in two buckets")

	bytes, objects = allocated(func() {
		r := newRolling(CountsOnly)
		for i := range 2 * w.Buckets { // every slot, twice
			r.Record(time.Duration(i)*width, SetOf(Success), NoLatency, NoLatency)
		}
	})
	assert.InDelta(t, 3+w.Buckets, objects, 0.1, "the ring, its epochs, its table and one bucket a slot")
	requireSize(t, ring+uintptr(w.Buckets)*bucketSize, bytes, "a ring whose every slot was used")

	r := newRolling(CountsAndLatencies)
	r.Record(0, SetOf(Success), NoLatency, NoLatency) // the slot's bucket
	bytes, objects = allocated(func() {
		r.Record(0, SetOf(ShortCircuited), NoLatency, NoLatency)
		r.Snapshot(0)
	})
	requireNone(t, bytes, objects, "a call without latency creates none")

	r = newRolling(CountsOnly)
	now := time.Duration(0)
	for range 3 * w.Buckets { // every slot's bucket
		now += width / 3
		r.Record(now, SetOf(Success), NoLatency, NoLatency)
	}
	bytes, objects = allocated(func() {
		now += width / 3 // through every bucket, rotating
		r.Record(now, SetOf(Success), time.Millisecond, 2*time.Millisecond)
		r.Record(now-w.Length, SetOf(Failure), time.Millisecond, time.Millisecond) // too late for any bucket
		r.Record(now, SetOf(Success), NoLatency, NoLatency)
		r.Snapshot(now)
		r.CumulativeLatency()
	})
	requireNone(t, bytes, objects, "a ring without latency, every slot used")
	r.Reset()
	s := r.Snapshot(now)
	assert.Zero(t, s.Run.Count+s.Total.Count)
	for i := range r.buckets {
		assert.Nil(t, r.buckets[i].latencies(), "bucket %d", i)
	}
	assert.Nil(t, r.sums)
	assert.Nil(t, r.foldedLat)
	runtime.KeepAlive(rings)
}

// TestRollingBusyRingKeepsOneHistogramPerSlot: once every bucket slot has
// had latencies, a ring records, rotates, snapshots and resets without
// allocating, and what left the window holds only the bins used.
func TestRollingBusyRingKeepsOneHistogramPerSlot(t *testing.T) {
	r := newRing(t, true)
	width := r.window.BucketWidth()
	now := time.Duration(0)
	step := func() {
		now += width / 2
		r.Record(now, SetOf(Success), time.Millisecond, time.Millisecond)
		r.Record(now, SetOf(Success), 3*time.Millisecond, 3*time.Millisecond)
		r.Snapshot(now)
	}
	for range 4 * len(r.buckets) {
		step()
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		step()
		if now%(7*width) == 0 {
			r.Reset()
		}
	}))
	for i := range r.buckets {
		require.NotNil(t, r.buckets[i].latencies(), "bucket %d", i)
		assert.Nil(t, r.buckets[i].latencies().run.Load(), "bucket %d: run and total never differed", i)
	}
	r.ring.Lock()
	assert.Len(t, r.foldedLat.same.bins, 2, "two bins used")
	assert.Empty(t, r.foldedLat.run.bins)
	r.ring.Unlock()
	run, total := r.CumulativeLatency()
	assert.Equal(t, run, total)
	assert.Equal(t, int64(2*(4*len(r.buckets)+100+1)), run.Count(), "every call, the warm-up run of AllocsPerRun included")
}

// TestRecordFirstLatency: the first latency of a bucket slot lands in the
// call's interval, before the clock's origin and at the ends of the clock
// too, or, when a rotation or a Reset came between the call's bucket lookup
// and the creation of the bucket's latencies, where a writer delayed as
// long puts it: in the slot's new interval, or cumulatively only.
func TestRecordFirstLatency(t *testing.T) {
	width := DefaultWindow().BucketWidth()
	for _, now := range []time.Duration{0, width - 1, -1, -width, -width - 1, math.MinInt64, math.MaxInt64} {
		r, err := NewRolling(DefaultWindow(), CountsAndLatencies)
		require.NoError(t, err)
		r.Record(now, SetOf(Success), time.Millisecond, time.Millisecond)
		s := r.Snapshot(now)
		assert.Equal(t, Counts{Success: 1}, s.Counts, "at %d", now)
		assert.EqualValues(t, 1, s.Run.Count, "at %d", now)
		assert.EqualValues(t, 1, s.Total.Count, "at %d", now)
	}

	r := newRing(t, true)
	b := r.at(0)
	r.Record(r.window.Length, SetOf(Success), NoLatency, NoLatency) // slot 0 rotates to the next window
	l := r.firstLatencies(b, 0, time.Millisecond, 2*time.Millisecond)
	require.NotNil(t, l, "the slot's latencies, for Record to record into")
	apart(&l.run).record(int64(time.Millisecond))
	apart(&l.total).record(int64(2 * time.Millisecond))
	s := r.Snapshot(r.window.Length)
	assert.EqualValues(t, 1, s.Run.Count, "in the slot's new interval")
	assert.EqualValues(t, 1, s.Total.Count)

	r = newRing(t, true)
	b = r.at(0)
	r.Reset()
	assert.Nil(t, r.firstLatencies(b, 0, time.Millisecond, time.Millisecond), "recorded already, cumulatively")
	assert.Zero(t, r.Snapshot(0).Run.Count, "a Reset came between: not in the window")
	run, total := r.CumulativeLatency()
	assert.EqualValues(t, 1, run.Count(), "but counted since creation")
	assert.EqualValues(t, 1, total.Count())
}

// TestBucketLayout: a bucket fills whole cache lines, and the latencies'
// pointer, which every Record reads, shares no line with the counter of an
// event a common call writes.
func TestBucketLayout(t *testing.T) {
	var b bucket
	require.Zero(t, unsafe.Sizeof(b)%cacheline.Size, "whole cache lines")
	lat := unsafe.Offsetof(b.lat) / cacheline.Size
	for _, e := range []Event{Success, Failure, Timeout, BadRequest, ShortCircuited, ThreadPoolRejected,
		SemaphoreRejected, FallbackSuccess, FallbackFailure, FallbackRejection, FallbackMissing,
		ExceptionThrown, Cancelled, Slow, QueueTimeout, Probe} {
		off := unsafe.Offsetof(b.counts) + uintptr(e)*unsafe.Sizeof(b.counts[0])
		assert.NotEqual(t, lat, off/cacheline.Size, "%v's counter is on the latencies' line", e)
	}
}
