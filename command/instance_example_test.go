package command_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// A rollout adds instance "new-1" with cold caches: its errors during its
// first minute are not counted by the breakers, while the warm instance's
// still are.
func ExampleWithInstance() {
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock})
	defer reg.Close(context.Background())
	b := circuit.Config{MinRequests: 20}
	inventory, err := reg.NewGroup("inventory", command.GroupConfig{Strategy: command.Semaphore,
		Breaker: b, CommandBreaker: b, InstanceWarmUp: time.Minute})
	if err != nil {
		panic(err)
	}
	get := func(instance string, err error) {
		_, _ = command.Execute(context.Background(), inventory, command.Func("getStock",
			func(context.Context) (int, error) { return 1, err }, nil), command.WithInstance(instance))
	}
	get("old-1", nil)
	clock.Advance(time.Hour)

	cold := errors.New("cache miss storm")
	for range 30 {
		get("new-1", cold)
	}
	get("old-1", nil)
	fmt.Println(inventory.Breaker().State(), inventory.Breaker().Snapshot().Health.Requests)
	// Output: closed 1
}
