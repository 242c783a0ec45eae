package command_test

import (
	"context"
	"fmt"
	"time"

	"github.com/bulwark-go/bulwark/command"
)

// The "dependency" preset is the recommended configuration for an HTTP or gRPC
// dependency: take it, set the timeout from the dependency's p99, and
// create the group.
func ExamplePreset() {
	cfg, err := command.Preset("dependency")
	if err != nil {
		panic(err)
	}
	cfg.Timeout = 250 * time.Millisecond
	reg := command.NewRegistry(command.RegistryConfig{})
	defer reg.Close(context.Background())
	inventory, err := reg.NewGroup("inventory", cfg)
	if err != nil {
		panic(err)
	}
	b := inventory.Config().Breaker
	fmt.Println(b.Window.Length, b.MinRequests, b.OpenDuration, b.OpenMaxDuration, b.HalfOpenFailures)
	// Output: 500ms 20 200ms 400ms 1
}
