package circuit

import (
	"log/slog"
	"testing"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// The hot path: Allow + Record(Success) on a closed breaker. Each benchmark
// reports its own baseline in the same run: the clock read the breaker pays
// once per call (in Record), which AllowAt + RecordAt avoid.

func benchBreaker(b *testing.B, clock metrics.Clock) *Breaker {
	br, err := New(Config{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return br
}

func BenchmarkClockBaseline(b *testing.B) {
	clock := metrics.SystemClock()
	b.ReportAllocs()
	var sink time.Duration
	for b.Loop() {
		sink += clock.Now()
	}
	_ = sink
}

func BenchmarkAllowRecord(b *testing.B) {
	br := benchBreaker(b, metrics.SystemClock())
	b.ReportAllocs()
	for b.Loop() {
		p, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		p.Record(metrics.Success, time.Millisecond)
	}
}

// With a manual clock: the breaker's own cost, without the clock read.
func BenchmarkAllowRecordManualClock(b *testing.B) {
	br := benchBreaker(b, new(metrics.ManualClock))
	b.ReportAllocs()
	for b.Loop() {
		p, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		p.Record(metrics.Success, time.Millisecond)
	}
}

// With the caller's clock reading (as command.Execute passes it): the
// breaker's own cost on a real clock, which the caller reads anyway.
func BenchmarkAllowAtRecordAt(b *testing.B) {
	clock := metrics.SystemClock()
	br := benchBreaker(b, clock)
	now := clock.Now()
	b.ReportAllocs()
	for b.Loop() {
		p, err := br.engine().AllowAt(now)
		if err != nil {
			b.Fatal(err)
		}
		p.RecordAt(now, metrics.Success, time.Millisecond)
	}
}

func BenchmarkAllowRecordParallel(b *testing.B) {
	br := benchBreaker(b, metrics.SystemClock())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := br.Allow()
			if err != nil {
				b.Fatal(err)
			}
			p.Record(metrics.Success, time.Millisecond)
		}
	})
}

// Refusing while open: the cost every call pays during an outage.
func BenchmarkAllowOpen(b *testing.B) {
	br := benchBreaker(b, metrics.SystemClock())
	for range 20 {
		p, _ := br.Allow()
		p.Record(metrics.Failure, time.Millisecond)
	}
	if br.State() != Open {
		b.Fatal("breaker did not open")
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := br.Allow(); err == nil {
			b.Fatal("admitted")
		}
	}
}

// A failure on a closed breaker that does not trip: the path every counted
// failure takes, which reads the window to judge it. A success in each of
// the window's buckets (steady traffic: every bucket is read) and
// FailureRatio 1 keep the ratio below 1, so the breaker stays closed however
// many failures the loop records. The clock is manual so that the window's
// first bucket starts at the breaker's creation (outcomes before it are not
// counted) and the loop's instant, the clock's, stays the window's last.
func BenchmarkAllowAtRecordAtFailure(b *testing.B) {
	clock := new(metrics.ManualClock)
	br, err := New(Config{Clock: clock, FailureRatio: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	w := br.Config().Window
	var now time.Duration
	for i := range w.Buckets {
		now = time.Duration(i) * w.BucketWidth()
		p, err := br.engine().AllowAt(now)
		if err != nil {
			b.Fatal(err)
		}
		p.RecordAt(now, metrics.Success, time.Millisecond)
	}
	clock.Set(now)
	if got := br.Snapshot().Health.Requests; got != int64(w.Buckets) {
		b.Fatalf("the window holds %d successes, want %d", got, w.Buckets)
	}
	b.ReportAllocs()
	for b.Loop() {
		p, err := br.engine().AllowAt(now)
		if err != nil {
			b.Fatal(err)
		}
		p.RecordAt(now, metrics.Failure, time.Millisecond)
	}
	if br.State() != Closed {
		b.Fatal("breaker tripped")
	}
}
