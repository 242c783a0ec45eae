package adaptive_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/adaptive"
	"github.com/bulwark-go/bulwark/metrics"
)

// A group whose bulkhead follows the dependency: it starts at Initial
// calls, and moves within [Min, Max] by the latency of the calls (see
// Config). A call beyond the limit in force is a bulkhead
// rejection, ErrRejected, as for any bulkhead; the snapshot tells the
// limit.
func Example() {
	reg := command.NewRegistry(command.RegistryConfig{Clock: new(metrics.ManualClock), Logger: slog.New(slog.DiscardHandler)})
	defer reg.Close(context.Background())
	g, err := reg.NewGroup("search", command.GroupConfig{
		Strategy: command.Semaphore,
		Timeout:  command.NoTimeout,
		Adaptive: adaptive.Config{Min: 1, Max: 50, Initial: 2},
	})
	if err != nil {
		panic(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	slow := command.Func("query", func(context.Context) (string, error) {
		started <- struct{}{}
		<-release
		return "results", nil
	}, nil)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { _, _ = command.Execute(context.Background(), g, slow) })
		<-started
	}
	_, err = command.Execute(context.Background(), g, slow)
	fmt.Println("third call rejected:", errors.Is(err, command.ErrRefused))
	s := g.Snapshot()
	fmt.Printf("limit %d, bulkhead capacity %d, max %d\n", s.Adaptive.Limit, s.Bulkhead.Capacity, g.Config().MaxConcurrent)
	close(release)
	wg.Wait()
	// Output:
	// third call rejected: true
	// limit 2, bulkhead capacity 2, max 50
}
