package metrics

import (
	"testing"
	"time"
)

func benchRing(b *testing.B) *Rolling {
	r, err := NewRolling(DefaultWindow(), true)
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
