package hedge_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/hedge"
)

// replicaRead is an idempotent read whose first call hangs (a slow replica)
// until its context is cancelled, while any other answers at once.
type replicaRead struct{ calls *atomic.Int32 }

func (l replicaRead) Name() string     { return "lookup" }
func (l replicaRead) Idempotent() bool { return true }
func (l replicaRead) Run(ctx context.Context) (string, error) {
	if l.calls.Add(1) == 1 {
		<-ctx.Done() // the slow one: cancelled once the hedge has answered
		return "", ctx.Err()
	}
	return "fast answer", nil
}

// A command hedged after 10 ms: its first attempt hangs, the hedge answers,
// and the first attempt is cancelled.
func Example() {
	reg := command.NewRegistry(command.RegistryConfig{})
	defer reg.Close(context.Background())
	g, err := reg.NewGroup("replicas", command.GroupConfig{Strategy: command.Semaphore, Timeout: command.NoTimeout,
		Commands: map[string]command.CommandConfig{"lookup": {Hedge: hedge.Config{MaxHedges: 1, Delay: 10 * time.Millisecond}}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	v, info, err := command.ExecuteInfo(context.Background(), g, replicaRead{new(atomic.Int32)})
	fmt.Println(v, err, info.Event, "attempts:", info.Attempts)
	// Output:
	// fast answer <nil> SUCCESS attempts: 2
}
