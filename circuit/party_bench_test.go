package circuit

import (
	"testing"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// gate is a Party whose probe gate is always open.
type gate struct{}

func (gate) MayProbe() bool { return true }
func (gate) Status() string { return "shared state: ok" }

// The closed hot path with a party joined and an observer added, to compare
// with BenchmarkAllowAtRecordAt: a fleet must add nothing to a call that
// succeeds.
func BenchmarkAllowAtRecordAtParty(b *testing.B) {
	clock := metrics.SystemClock()
	br := benchBreaker(b, clock)
	if _, err := br.engine().Join(gate{}); err != nil {
		b.Fatal(err)
	}
	defer br.Observe(func(Transition) {})()
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
