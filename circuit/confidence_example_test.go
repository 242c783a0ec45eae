package circuit_test

import (
	"fmt"
	"log/slog"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/metrics"
)

// With Confidence set, a breaker trips on the lower bound of the failure
// ratio's Wilson score interval: 10 failures in 20 calls are a ratio of
// 0.5, at the threshold, but a bound of 0.30, so the plain breaker trips
// and this one does not. 20 more failures leave no doubt.
func ExampleConfig_confidence() {
	for _, confidence := range []float64{0, 0.95} {
		b, _ := circuit.New(circuit.Config{
			MinRequests:  20,
			FailureRatio: 0.5,
			Confidence:   confidence,
			Clock:        new(metrics.ManualClock),
			Logger:       slog.New(slog.DiscardHandler),
		})
		call := func(o metrics.Event, n int) {
			for range n {
				if p, err := b.Allow(); err == nil {
					p.Record(o, 0)
				}
			}
		}
		call(metrics.Success, 10)
		call(metrics.Failure, 10)
		h := b.Snapshot().Health
		fmt.Printf("confidence %v: ratio %.2f, bound %.2f: %v\n", confidence, h.ErrorRatio, h.ErrorBound, b.State())
		call(metrics.Failure, 20)
		fmt.Println("  after 20 more failures:", b.State())
	}
	// Output:
	// confidence 0: ratio 0.50, bound 0.50: open
	//   after 20 more failures: open
	// confidence 0.95: ratio 0.50, bound 0.30: closed
	//   after 20 more failures: open
}
