package command_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
)

// greet is a command: Run is the call to the dependency; the result type is
// string.
type greet struct{ name string }

func (g greet) Run(ctx context.Context) (string, error) { return "hello, " + g.name, nil }

func ExampleExecute() {
	reg := command.NewRegistry(command.RegistryConfig{})
	defer reg.Close(context.Background())
	greeter, err := reg.NewGroup("greeter", command.GroupConfig{Timeout: 100 * time.Millisecond})
	if err != nil {
		panic(err)
	}

	s, err := command.Execute(context.Background(), greeter, greet{name: "Ada"})
	fmt.Println(s, err)
	// Output: hello, Ada <nil>
}

// Func makes a one-off command from functions, without a named type.
func ExampleFunc() {
	reg := command.NewRegistry(command.RegistryConfig{})
	defer reg.Close(context.Background())
	users, err := reg.NewGroup("users", command.GroupConfig{Timeout: 100 * time.Millisecond})
	if err != nil {
		panic(err)
	}

	id := 7
	name, info, err := command.ExecuteInfo(context.Background(), users, command.Func("getUser",
		func(ctx context.Context) (string, error) { return "", fmt.Errorf("user %d: service down", id) },
		func(ctx context.Context, err error) (string, error) { return "guest", nil }))
	fmt.Println(name, err, info.Command, info.Event)
	// Output: guest <nil> getUser FAILURE
}

// getProfile can degrade: when Run fails, Fallback serves a guest profile.
type getProfile struct{ id int }

func (getProfile) Run(ctx context.Context) (string, error) {
	return "", errors.New("profile service down")
}

func (getProfile) Fallback(ctx context.Context, err error) (string, error) {
	return "guest", nil
}

func ExampleExecuteInfo() {
	reg := command.NewRegistry(command.RegistryConfig{})
	defer reg.Close(context.Background())
	profiles, err := reg.NewGroup("profiles", command.GroupConfig{})
	if err != nil {
		panic(err)
	}

	p, info, err := command.ExecuteInfo(context.Background(), profiles, getProfile{id: 7})
	fmt.Println(p, err)
	fmt.Println("degraded:", info.Degraded, "because of", info.Event)
	fmt.Println(info.Command, info.Events)
	if info.Event == metrics.Failure { // the outcomes are command's constants: no metrics import
		fmt.Println("the dependency failed; label:", info.Event.Label())
	}
	// Output:
	// guest <nil>
	// degraded: true because of FAILURE
	// getProfile FAILURE|FALLBACK_SUCCESS
	// the dependency failed; label: failure
}

// charge is a payment: it must never succeed by fallback.
type charge struct {
	command.NoFallback
	cents int
}

func (charge) Run(ctx context.Context) (string, error) {
	return "", errors.New("payment gateway unreachable")
}

func ExampleNoFallback() {
	reg := command.NewRegistry(command.RegistryConfig{})
	defer reg.Close(context.Background())
	payments, err := reg.NewGroup("payments", command.GroupConfig{})
	if err != nil {
		panic(err)
	}

	_, err = command.Execute(context.Background(), payments, charge{cents: 1999})
	fmt.Println(err)
	fmt.Println(errors.Is(err, command.ErrFallbackMissing))
	// Output:
	// command payments/charge: failure: payment gateway unreachable (fallback: command: no fallback)
	// true
}

// lookup rejects malformed ids itself: the caller's fault, not the
// dependency's.
type lookup struct{ id string }

var errMalformed = errors.New("malformed id")

func (l lookup) Run(ctx context.Context) (int, error) {
	if l.id == "" {
		return 0, command.BadRequest(errMalformed)
	}
	return len(l.id), nil
}

func ExampleBadRequest() {
	reg := command.NewRegistry(command.RegistryConfig{})
	defer reg.Close(context.Background())
	accounts, err := reg.NewGroup("accounts", command.GroupConfig{Strategy: command.Semaphore})
	if err != nil {
		panic(err)
	}

	_, info, err := command.ExecuteInfo(context.Background(), accounts, lookup{})
	fmt.Println(info.Event, errors.Is(err, errMalformed), command.IsBadRequest(err))
	fmt.Println("counted by the breaker:", accounts.Breaker().Snapshot().Health.Requests)
	// Output:
	// BAD_REQUEST true true
	// counted by the breaker: 0
}

func ExampleRegistry_Snapshot() {
	reg := command.NewRegistry(command.RegistryConfig{})
	defer reg.Close(context.Background())
	profiles, _ := reg.NewGroup("profiles", command.GroupConfig{Strategy: command.Semaphore})
	greeter, _ := reg.NewGroup("greeter", command.GroupConfig{})
	ctx := context.Background()
	for range 3 {
		_, _ = command.Execute(ctx, profiles, getProfile{})
	}
	_, _ = command.Execute(ctx, greeter, greet{"Bo"})

	for _, g := range reg.Snapshot().Groups {
		fmt.Println(g.Name, g.Config.Strategy, g.Breaker.State)
		for _, c := range g.Commands {
			fmt.Printf("  %s: %d calls, %d failures, degraded rate %.0f%%\n", c.Name,
				c.Metrics.Cumulative[metrics.Success]+c.Metrics.Cumulative[metrics.Failure],
				c.Metrics.Counts[metrics.Failure], 100*c.Metrics.Counts.DegradedRate())
		}
	}
	// Output:
	// greeter THREAD closed
	//   greet: 1 calls, 0 failures, degraded rate 0%
	// profiles SEMAPHORE closed
	//   getProfile: 3 calls, 3 failures, degraded rate 100%
}

// ExampleRegistry_Close shuts down with a deadline: Close waits for the
// calls still running, detached ones included (a Run that outlived its
// caller's timeout keeps its worker until it returns), until ctx ends, then
// reports what it cut off.
func ExampleRegistry_Close() {
	reg := command.NewRegistry(command.RegistryConfig{})
	g, err := reg.NewGroup("reports", command.GroupConfig{Timeout: 500 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	release := make(chan struct{})
	_, err = command.Execute(context.Background(), g, slowReport{release})
	fmt.Println(errors.Is(err, command.ErrTimeout)) // the caller left; the Run goes on, detached

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = reg.Close(ctx)
	var ce *isolation.CloseError
	fmt.Println(errors.As(err, &ce), ce.Running, errors.Is(err, context.DeadlineExceeded))

	_, err = reg.NewGroup("late", command.GroupConfig{})
	fmt.Println(errors.Is(err, command.ErrClosed)) // Close is final
	// The detached Run returns; its goroutine ends.
	close(release)
	// Output:
	// true
	// true 1 true
	// true
}

// slowReport is a command whose Run ignores its context until release.
type slowReport struct{ release chan struct{} }

func (r slowReport) Run(context.Context) (int, error) {
	<-r.release
	return 1, nil
}
