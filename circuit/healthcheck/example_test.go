package healthcheck_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/circuit/healthcheck"
	"github.com/bulwark-go/bulwark/metrics"
)

// A health check turns the breaker half-open as soon as the dependency
// answers it, instead of after the open duration. With Manual the caller
// runs the checks (here on a virtual clock); with an interval the checker
// runs them itself while the breaker is open.
func ExampleStart() {
	clock := new(metrics.ManualClock)
	b, _ := circuit.New(circuit.Config{
		Name:              "users-db",
		MinRequests:       4,
		OpenDuration:      time.Minute,
		HalfOpenSuccesses: 2,
		Clock:             clock,
		Logger:            slog.New(slog.DiscardHandler),
		OnTransition: func(t circuit.Transition) {
			fmt.Printf("%v: %v -> %v (%v)\n", t.At, t.From, t.To, t.Reason)
		},
	})
	healthy := false
	checker, err := healthcheck.Start(b, healthcheck.Config{
		Check: func(ctx context.Context) error {
			if !healthy {
				return errors.New("connection refused")
			}
			return nil
		},
		Interval: healthcheck.Manual,
	})
	if err != nil {
		panic(err)
	}
	defer checker.Stop()
	call := func(o metrics.Event) {
		if p, err := b.Allow(); err == nil {
			p.Record(o, time.Millisecond)
		}
	}
	for range 4 {
		call(metrics.Failure)
	}
	clock.Advance(500 * time.Millisecond)
	fmt.Println(checker.Check(context.Background()))
	healthy = true
	clock.Advance(500 * time.Millisecond)
	fmt.Println(checker.Check(context.Background()))
	call(metrics.Success)
	call(metrics.Success)
	fmt.Println(b.Snapshot().HealthCheck)
	// Output:
	// 0s: closed -> open (error_ratio)
	// circuit: health check failed: breaker "users-db": connection refused
	// 1s: open -> half-open (health_check)
	// <nil>
	// 1s: half-open -> closed (probes_succeeded)
	// 2 checks, 1 failed; last passed
}
