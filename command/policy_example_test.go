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
	fmt.Println(s.State, s.WarmingUp, s.WarmUpLeft)
	// Output: closed true 1m0s
}
