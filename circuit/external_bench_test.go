package circuit

import (
	"testing"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// The closed hot path with every external hook installed (external counts,
// probe gate, watcher), to compare with BenchmarkAllowAtRecordAt: a fleet
// must add nothing to a call that succeeds.
func BenchmarkAllowAtRecordAtExternal(b *testing.B) {
	clock := metrics.SystemClock()
	br := benchBreaker(b, clock)
	var c metrics.Counts
	c[metrics.Success] = 100
	if err := br.SetExternal(c, time.Hour); err != nil {
		b.Fatal(err)
	}
	br.SetProbeGate(func() bool { return true })
	br.Watch(func(Transition) {})
	now := clock.Now()
	b.ReportAllocs()
	for b.Loop() {
		p, err := br.AllowAt(now)
		if err != nil {
			b.Fatal(err)
		}
		p.RecordAt(now, Success, time.Millisecond)
	}
}
