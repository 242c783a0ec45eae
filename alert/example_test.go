package alert_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/bulwark-go/bulwark/alert"
	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// Alerts: a breaker open for a minute is a P3, for ten minutes a P2; each
// alert carries the trip's reason, window and error samples.
func Example() {
	w, err := alert.New(alert.Config{Interval: time.Hour, OnAlert: func(a alert.Alert) {
		fmt.Printf("%s %s %s/%s open %v (%s, %d of %d failed) errors %q\n",
			a.Kind, a.Tier, a.Group, a.Command, a.OpenFor, a.Reason, a.Health.Failures, a.Health.Requests, a.Errors[0].Err)
	}})
	if err != nil {
		panic(err)
	}
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	defer reg.Close(context.Background())
	g, err := reg.NewGroup("payments", command.GroupConfig{
		Strategy:       command.Semaphore,
		CommandBreaker: circuit.Config{MinRequests: 1, Open: circuit.OpenConfig{Duration: time.Hour}},
		Alerts:         w,
	})
	if err != nil {
		panic(err)
	}
	charge := command.Func("charge", func(ctx context.Context) (int, error) {
		return 0, errors.New("dial tcp: connection refused")
	}, nil)
	_, _ = command.Execute(context.Background(), g, charge)
	for range 10 {
		clock.Advance(time.Minute)
		w.Check() // the watcher's goroutine does this every Interval; here the clock is manual
	}
	// Output:
	// breaker_open P3 payments/charge open 1m0s (error_ratio, 1 of 1 failed) errors "dial tcp: connection refused"
	// breaker_open P2 payments/charge open 10m0s (error_ratio, 1 of 1 failed) errors "dial tcp: connection refused"
}
