package command_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// IsProbe lets Run tag the half-open probe, here in a log line; package
// httpguard sends it as the header X-Breaker-Probe: 1.
func ExampleIsProbe() {
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	defer reg.Close(context.Background())
	g, err := reg.NewGroup("search", command.GroupConfig{
		Strategy:       command.Semaphore,
		CommandBreaker: circuit.Config{MinRequests: 1, OpenDuration: 5 * time.Second, HalfOpenSuccesses: 1},
	})
	if err != nil {
		panic(err)
	}
	healthy := false
	query := command.Func("query", func(ctx context.Context) (string, error) {
		fmt.Println("request, probe:", command.IsProbe(ctx))
		if !healthy {
			return "", errors.New("connection refused")
		}
		return "results", nil
	}, nil)

	_, err = command.Execute(context.Background(), g, query) // trips the breaker
	fmt.Println(err != nil)
	clock.Advance(5 * time.Second)
	healthy = true
	_, info, err := command.ExecuteInfo(context.Background(), g, query)
	fmt.Println(info.Events.Has(metrics.Probe), info.Events, err)
	// Output:
	// request, probe: false
	// true
	// request, probe: true
	// true SUCCESS|PROBE|PROBE_SUCCESS <nil>
}

// ProbeClassifier judges a probe apart from normal calls: under this rule
// any answer proves the dependency reachable, so a probe answered with an
// error that is the server's answer closes the breaker, though the caller
// still gets the failure.
func ExampleGroupConfig_probeClassifier() {
	errServer := errors.New("status 500")
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	defer reg.Close(context.Background())
	g, err := reg.NewGroup("billing", command.GroupConfig{
		Strategy:       command.Semaphore,
		CommandBreaker: circuit.Config{MinRequests: 1, OpenDuration: 5 * time.Second, HalfOpenSuccesses: 1},
		ProbeClassifier: func(err error) metrics.Event {
			if errors.Is(err, errServer) {
				return metrics.Success // an answer: reachable
			}
			return metrics.Failure
		},
	})
	if err != nil {
		panic(err)
	}
	invoice := command.Func("invoice", func(ctx context.Context) (int, error) { return 0, errServer }, nil)
	_, _ = command.Execute(context.Background(), g, invoice)
	b, _ := g.CommandBreaker("invoice")
	fmt.Println(b.State())
	clock.Advance(5 * time.Second)
	_, info, err := command.ExecuteInfo(context.Background(), g, invoice)
	fmt.Println(info.Event, info.Events.Has(metrics.ProbeSuccess), errors.Is(err, errServer), b.State())
	// Output:
	// open
	// FAILURE true true closed
}

// A deploy hook calls Group.WarmUp when new instances join: their cold
// failures are not counted by the group's breakers.
func ExampleGroup_WarmUp() {
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	defer reg.Close(context.Background())
	breaker := circuit.Config{MinRequests: 4, OpenDuration: time.Minute}
	search, err := reg.NewGroup("search", command.GroupConfig{Strategy: command.Semaphore, CommandBreaker: breaker})
	if err != nil {
		panic(err)
	}
	query := command.Func("query", func(ctx context.Context) (string, error) {
		return "", errors.New("cache cold")
	}, nil)

	_ = search.WarmUp(time.Minute) // from the deploy hook
	for range 10 {
		_, _ = command.Execute(context.Background(), search, query)
	}
	b, _ := search.CommandBreaker("query")
	s := b.Snapshot()
	fmt.Println(s.State, s.WarmUpLeft)
	// Output: closed 1m0s
}
