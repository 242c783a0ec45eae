package windowed

import (
	"testing"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// BenchmarkBreakerWindow is a breaker's window write per call, a success:
// into a Tally of the four events a breaker judges, and, for comparison,
// into a counts-only Rolling (Record without latency).
func BenchmarkBreakerWindow(b *testing.B) {
	b.Run("tally", func(b *testing.B) {
		t, err := NewTally(metrics.DefaultWindow(), breakerSet)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			t.Record(time.Duration(i), metrics.SetOf(metrics.Success))
		}
	})
	b.Run("rolling", func(b *testing.B) {
		r, err := metrics.NewRolling(metrics.DefaultWindow(), metrics.CountsOnly)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			r.Record(time.Duration(i), metrics.SetOf(metrics.Success), metrics.NoLatency, metrics.NoLatency)
		}
	})
}
