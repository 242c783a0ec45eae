package metrics

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fullMerge is the window's latencies at instant at, merged from every live
// bucket's bins: what Snapshot must equal.
func fullMerge(r *Rolling, at time.Duration) (run, total Latency) {
	r.ring.Lock()
	defer r.ring.Unlock()
	return r.mergeLive(r.ring.Epoch(at))
}

// requireExactSnapshot checks r's snapshot at instant at against the full
// merge.
func requireExactSnapshot(t *testing.T, r *Rolling, at time.Duration, msg string, args ...any) {
	t.Helper()
	s := r.Snapshot(at)
	run, total := fullMerge(r, at)
	require.Equal(t, run, s.Run, append([]any{"run: " + msg}, args...)...)
	require.Equal(t, total, s.Total, append([]any{"total: " + msg}, args...)...)
}

// randomLatencies returns a call's run and total latencies: mostly equal,
// sometimes apart, sometimes without a run, zero, or beyond the clamp.
func randomLatencies(rng *rand.Rand) (run, total time.Duration) {
	d := time.Duration(rng.Int64N(int64(10 * time.Millisecond)))
	switch x := rng.IntN(10); {
	case x < 5:
		return d, d
	case x < 6:
		return d, d + time.Duration(rng.Int64N(1000))
	case x < 7:
		return NoLatency, d
	case x < 8:
		return d, NoLatency
	case x < 9:
		return 0, 0
	default:
		return time.Duration(rng.Int64N(1 << 50)), time.Duration(rng.Int64N(1 << 50))
	}
}

// The running sums against a full merge over random sequences on a virtual
// clock: forward steps, bucket edges, writes behind the newest bucket (into
// sealed ones), jumps back and far ahead, Resets, and snapshots at instants
// behind, inside and ahead of the newest write.
func TestWindowSumsMatchFullMerge(t *testing.T) {
	for seed := range uint64(120) {
		rng := rand.New(rand.NewPCG(seed, 24))
		w := []Window{{Length: time.Second, Buckets: 10}, {Length: 3 * time.Millisecond, Buckets: 3},
			{Length: time.Second, Buckets: 1}, {Length: 16 * time.Millisecond, Buckets: 16}}[rng.IntN(4)]
		r, err := NewRolling(w, CountsAndLatencies)
		require.NoError(t, err)
		width, n := int64(w.BucketWidth()), int64(w.Buckets)
		now := rng.Int64N(4*width*n) - 2*width*n
		for step := range 200 {
			switch x := rng.IntN(20); {
			case x < 8:
				now += rng.Int64N(width / 2)
			case x < 11:
				now = (now/width+1)*width - rng.Int64N(2)
			case x < 13:
				now -= rng.Int64N(width * n) // behind the newest bucket: a late writer
			case x < 14:
				now += rng.Int64N(3 * width * n)
			case x < 15 && rng.IntN(4) == 0:
				r.Reset()
			}
			for range rng.IntN(4) {
				run, total := randomLatencies(rng)
				r.Record(time.Duration(now), SetOf(Success), run, total)
			}
			at := time.Duration(now + rng.Int64N(2*width*n) - width*n)
			requireExactSnapshot(t, r, at, "seed %d step %d: window %v at %d after a write at %d", seed, step, w, at, now)
			if rng.IntN(3) == 0 {
				requireExactSnapshot(t, r, time.Duration(now), "seed %d step %d: at the write", seed, step)
			}
		}
	}
}

// The common case reads the sums without rebuilding them: calls only move
// forward, and every snapshot is exact. The sums, created by the second
// bucket's rotation, are valid from then on.
func TestWindowSumsStayValidMovingForward(t *testing.T) {
	r := newRing(t, true)
	rng := rand.New(rand.NewPCG(1, 2))
	created := false
	for step := range 2000 {
		now := time.Duration(step) * 7 * time.Millisecond
		run, total := randomLatencies(rng)
		r.Record(now, SetOf(Success), run, total)
		if step%13 == 0 {
			r.ring.Lock()
			sums := r.sums
			valid := sums != nil && sums.valid
			r.ring.Unlock()
			if sums != nil {
				created = true
				require.True(t, valid, "step %d: the sums need no rebuild", step)
			}
			requireExactSnapshot(t, r, now, "step %d", step)
		}
	}
	require.True(t, created, "the sums were created")
}

// Sums created by a rotation hold what the rotations before would have
// added: a window filled without a snapshot needs no rebuild at the first.
func TestWindowSumsBuiltAtCreation(t *testing.T) {
	r := newRing(t, true)
	width := r.window.BucketWidth()
	for k := range 2 * len(r.buckets) {
		r.Record(time.Duration(k)*width, SetOf(Success), time.Duration(k+1)*time.Millisecond, time.Duration(k+1)*time.Millisecond)
	}
	r.ring.Lock()
	require.NotNil(t, r.sums)
	require.True(t, r.sums.valid)
	sealed := 0
	for _, m := range r.sums.marks {
		if m.sealed {
			sealed++
		}
	}
	r.ring.Unlock()
	require.Equal(t, len(r.buckets)-1, sealed, "every bucket but the newest")
	requireExactSnapshot(t, r, time.Duration(2*len(r.buckets)-1)*width, "the first snapshot")
}

// Writers race rotation, late writes and snapshots: each raises a shared
// clock as it goes (so the slower ones write behind the newest bucket) while
// a reader takes snapshots. Once they stop, every snapshot equals the full
// merge, and the window of the whole run counts every latency recorded.
func TestWindowSumsExactUnderConcurrency(t *testing.T) {
	const writers, per = 4, 30_000
	w := Window{Length: 200 * time.Millisecond, Buckets: 20}
	r, err := NewRolling(w, CountsAndLatencies)
	require.NoError(t, err)
	stride := int64(time.Microsecond)
	var clock atomic.Int64
	var wg sync.WaitGroup
	done := make(chan struct{})
	for i := range writers {
		wg.Go(func() {
			for k := range int64(per) {
				target := k * stride
				for c := clock.Load(); c < target && !clock.CompareAndSwap(c, target); c = clock.Load() {
				}
				now := time.Duration(clock.Load())
				if k%3 == 0 {
					r.Record(now, SetOf(Success), time.Duration(k%7000)+time.Duration(i), time.Duration(k%9000))
				} else {
					r.Record(now, SetOf(Success), time.Duration(k%5000), time.Duration(k%5000))
				}
			}
		})
	}
	var reader sync.WaitGroup
	reader.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				s := r.Snapshot(time.Duration(clock.Load()))
				require.LessOrEqual(t, s.Run.Count, int64(writers*per))
			}
		}
	})
	wg.Wait()
	close(done)
	reader.Wait()
	end := time.Duration(clock.Load())
	for _, at := range []time.Duration{end, end - w.Length/2, end + w.Length/3, end - w.Length - 1} {
		requireExactSnapshot(t, r, at, "at %v (end %v)", at, end)
	}
	s := r.Snapshot(end)
	require.Equal(t, int64(writers*per), s.Run.Count, "the window spans the whole run")
	require.Equal(t, int64(writers*per), s.Total.Count)
}

// Full bins, bins past binMax (writers racing a full bin's saturation) and
// saturated sums read as the full merge reads them, in the newest bucket and
// in sealed ones.
func TestWindowSumsSaturatedBins(t *testing.T) {
	r := newRing(t, true)
	width := r.window.BucketWidth()
	for k := range 4 {
		now := time.Duration(k) * width
		r.Record(now, SetOf(Success), time.Millisecond, time.Millisecond)
		r.Record(now, SetOf(Success), 0, 2*time.Millisecond)
		requireExactSnapshot(t, r, now, "bucket %d, before", k)
		b := r.at(now)
		h := &b.lat.Load().same
		// A full bin as writers leave it: binMax records (their sum added)
		// and some past it, racing the saturation, and then their events.
		h.bins[binOf(int64(time.Millisecond))].Store(binMax + 5)
		h.sum.Add((binMax - 1) * int64(time.Millisecond))
		b.add(SetOf(Success))
		requireExactSnapshot(t, r, now, "bucket %d, a bin past binMax", k)
		if k == 2 {
			h.sum.Store(sumSaturated)
			b.add(SetOf(Success))
			requireExactSnapshot(t, r, now, "bucket %d, a saturated sum", k)
		}
	}
	requireExactSnapshot(t, r, 3*width+width/2, "at the end")
}

// A snapshot of an unchanged window returns the last one's latencies
// without reading a histogram, and every write is seen by the next
// snapshot: a Record into the newest bucket or a sealed one, with events or
// without (counted in bare), and a writer delayed between its bucket lookup
// and its writes, once its events are in.
func TestWindowSumsSeeEveryWrite(t *testing.T) {
	r := newRing(t, true)
	width := r.window.BucketWidth()
	now := 10*width + width/2
	for k := range 11 {
		r.Record(time.Duration(k)*width, SetOf(Success), time.Duration(k+1)*time.Millisecond, time.Duration(k+1)*time.Millisecond)
	}
	first := r.Snapshot(now)
	r.ring.Lock()
	gen, memoOK := r.sums.gen, r.sums.memo.ok
	r.ring.Unlock()
	require.True(t, memoOK)
	require.Equal(t, first, r.Snapshot(now), "nothing changed")
	r.ring.Lock()
	require.Equal(t, gen, r.sums.gen, "the sums did not change")
	r.ring.Unlock()
	requireExactSnapshot(t, r, now, "unchanged")

	count := first.Run.Count
	seen := func(msg string) {
		t.Helper()
		count++
		s := r.Snapshot(now)
		require.Equal(t, count, s.Run.Count, msg)
		require.Equal(t, count, s.Total.Count, msg)
		requireExactSnapshot(t, r, now, msg)
	}
	r.Record(now, SetOf(Success), 20*time.Millisecond, 20*time.Millisecond)
	seen("a Record into the newest bucket")
	r.Record(now, 0, 21*time.Millisecond, 21*time.Millisecond)
	seen("a Record without an event into the newest bucket")
	r.Record(now-3*width, SetOf(Failure), 22*time.Millisecond, 22*time.Millisecond)
	seen("a Record into a sealed bucket")
	r.Record(now-4*width, 0, 23*time.Millisecond, 23*time.Millisecond)
	seen("a Record without an event into a sealed bucket")

	for _, at := range []time.Duration{now, now - 5*width} {
		b := r.at(at) // a writer that found its bucket, then was delayed
		requireExactSnapshot(t, r, now, "before the delayed writer at %v", at)
		b.lat.Load().same.record(int64(24 * time.Millisecond))
		b.add(SetOf(Success))
		seen(fmt.Sprintf("a delayed writer at %v", at))
	}
}
