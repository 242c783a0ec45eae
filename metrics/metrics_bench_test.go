package metrics

import (
	"testing"
	"time"
)

func benchRing(b *testing.B) *Rolling {
	r, err := NewRolling(DefaultWindow(), CountsAndLatencies)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

func BenchmarkAdd(b *testing.B) {
	r := benchRing(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.Add(time.Duration(i), Success)
	}
}

func BenchmarkObserveTotal(b *testing.B) {
	r := benchRing(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.ObserveTotal(time.Duration(i), time.Duration(i&0xfffff))
	}
}

// BenchmarkRecord is what the executor does per call: the call's event,
// run and total latency in one bucket lookup; run and total are equal (no
// fallback, no queue), so one histogram record.
func BenchmarkRecord(b *testing.B) {
	r := benchRing(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.Record(time.Duration(i), SetOf(Success), time.Duration(i&0xfffff), time.Duration(i&0xfffff))
	}
}

// BenchmarkRecordApart is a call whose run and total latencies differ (a
// fallback ran, or it waited in a queue): two histogram records.
func BenchmarkRecordApart(b *testing.B) {
	r := benchRing(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.Record(time.Duration(i), SetOf(Failure, FallbackSuccess), time.Duration(i&0xfffff), time.Duration(i&0xfffff)+1)
	}
}

// BenchmarkRecordSeparate is the same through the single-purpose methods: a
// bucket lookup each.
func BenchmarkRecordSeparate(b *testing.B) {
	r := benchRing(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.Add(time.Duration(i), Success)
		r.ObserveRun(time.Duration(i), time.Duration(i&0xfffff))
		r.ObserveTotal(time.Duration(i), time.Duration(i&0xfffff))
	}
}

// BenchmarkRecordRotating writes 1 ms apart into a ring of 1 ms buckets: a
// rotation (mutex, emptying a bucket and its histograms) on every call, the
// worst case the hint cannot help.
func BenchmarkRecordRotating(b *testing.B) {
	r, err := NewRolling(Window{Length: time.Second, Buckets: 1000}, CountsAndLatencies)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.Record(time.Duration(i)*time.Millisecond, SetOf(Success), time.Millisecond, time.Millisecond)
	}
}

func BenchmarkRecordParallel(b *testing.B) {
	r := benchRing(b)
	now := SystemClock().Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			r.Record(now, SetOf(Success), time.Duration(i&0xfffff), time.Duration(i&0xfffff))
		}
	})
}

func BenchmarkAddParallel(b *testing.B) {
	r := benchRing(b)
	clock := SystemClock()
	now := clock.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Add(now, Success)
		}
	})
}

func BenchmarkObserveTotalParallel(b *testing.B) {
	r := benchRing(b)
	now := SystemClock().Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			r.ObserveTotal(now, time.Duration(i&0xfffff))
		}
	})
}

func BenchmarkSnapshot(b *testing.B) {
	r := benchRing(b)
	for i := range 10_000 {
		r.ObserveTotal(time.Duration(i)*time.Millisecond, time.Duration(i)*time.Microsecond)
	}
	b.ReportAllocs()
	for b.Loop() {
		r.Snapshot(10 * time.Second)
	}
}

func BenchmarkSystemClock(b *testing.B) {
	c := SystemClock()
	b.ReportAllocs()
	for b.Loop() {
		_ = c.Now()
	}
}

// BenchmarkCounts reads a full window (an event in each of its 10 buckets)
// three ways: every event (Counts), four (CountsOf), and one (Count).
func BenchmarkCounts(b *testing.B) {
	r := benchRing(b)
	w := r.Window()
	for i := range w.Buckets {
		r.Record(time.Duration(i)*w.BucketWidth(), SetOf(Success, Failure), NoLatency, NoLatency)
	}
	now := w.Length - 1
	health := SetOf(Success, Failure, Timeout, Slow)
	var sink int64
	b.Run("Counts", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink += r.Counts(now)[Success]
		}
	})
	b.Run("CountsOf", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink += r.CountsOf(now, health)[Success]
		}
	})
	b.Run("Count", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink += r.Count(now, Success)
		}
	})
	if sink == 0 {
		b.Fatal("read nothing")
	}
}
