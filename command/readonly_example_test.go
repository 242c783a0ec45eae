package command_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/bulwark-go/bulwark/command"
)

// placeOrder is a write: in read-only mode it is refused.
type placeOrder struct{ id int }

func (placeOrder) Run(ctx context.Context) (string, error) { return "placed", nil }
func (placeOrder) Write() bool                             { return true }

// getOrder is a read: it goes on in read-only mode.
type getOrder struct{ id int }

func (getOrder) Run(ctx context.Context) (string, error) { return "order 7", nil }

// Storage failover: the primary cannot take writes, the replicas still
// serve reads. Registry.SetReadOnly refuses every write at once.
func ExampleRegistry_SetReadOnly() {
	reg := command.NewRegistry(command.RegistryConfig{})
	defer reg.Close(context.Background())
	orders, err := reg.NewGroup("orders", command.GroupConfig{Strategy: command.Semaphore})
	if err != nil {
		panic(err)
	}

	reg.SetReadOnly(true)
	_, info, err := command.ExecuteInfo(context.Background(), orders, placeOrder{id: 7})
	fmt.Println(errors.Is(err, command.ErrRefused), info.Event)
	s, err := command.Execute(context.Background(), orders, getOrder{id: 7})
	fmt.Println(s, err)

	reg.SetReadOnly(false)
	s, err = command.Execute(context.Background(), orders, placeOrder{id: 7})
	fmt.Println(s, err)
	// Output:
	// true READ_ONLY
	// order 7 <nil>
	// placed <nil>
}
