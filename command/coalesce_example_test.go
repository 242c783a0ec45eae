package command_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// profile is a command whose answer depends on its id alone: calls with the
// same id may share one Run (Key).
type profile struct {
	id   int
	runs *atomic.Int64
	wait func(context.Context) // the dependency answers once it returns
}

func (p profile) Key() string { return fmt.Sprint(p.id) }

func (p profile) Run(ctx context.Context) (string, error) {
	p.runs.Add(1)
	p.wait(ctx)
	return fmt.Sprintf("profile %d", p.id), nil
}

// With CommandConfig.Coalesce, 100 concurrent calls for the same profile
// make one Run: the first call's; the 99 others share its answer and are
// COALESCED.
func ExampleCommandConfig_coalesce() {
	reg := command.NewRegistry(command.RegistryConfig{})
	defer reg.Close(context.Background())
	// No timeout: how long 100 goroutines take to start must not decide
	// the output (with one, a waiter that starts late would time out).
	users, _ := reg.NewGroup("users", command.GroupConfig{Strategy: command.Semaphore, Timeout: command.NoTimeout,
		Commands: map[string]command.CommandConfig{"profile": {Coalesce: true}}})

	var runs atomic.Int64
	// A slow dependency: it answers once the 99 other calls wait for its
	// Run. (Waiting for 100 calls in flight instead let a call counted in
	// flight but not yet joined come too late, start a Run of its own and
	// wait forever for 100.)
	everyone := func(ctx context.Context) {
		for coalescing(users) < 99 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
	}
	var wg sync.WaitGroup
	answers := make([]string, 100)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], _ = command.Execute(context.Background(), users, profile{id: 7, runs: &runs, wait: everyone})
		}()
	}
	wg.Wait()

	c := users.Snapshot().Commands[0].Metrics.Counts
	fmt.Println(answers[0], answers[99])
	fmt.Println("Runs:", runs.Load())
	fmt.Println("SUCCESS:", c[metrics.Success], "COALESCED:", c[metrics.Coalesced])
	// Output:
	// profile 7 profile 7
	// Runs: 1
	// SUCCESS: 1 COALESCED: 99
}

// coalescing returns the calls of the group's first command waiting for
// another call's Run.
func coalescing(g *command.Group) int64 {
	if s := g.Snapshot(); len(s.Commands) > 0 {
		return s.Commands[0].Coalescing
	}
	return 0
}
