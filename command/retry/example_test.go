package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/retry"
)

// getQuote fails twice, then answers. It is Idempotent: reading a quote
// twice does no harm, so the group may retry it.
type getQuote struct{ tries *int }

func (q getQuote) Run(context.Context) (float64, error) {
	if *q.tries++; *q.tries < 3 {
		return 0, errors.New("connection reset")
	}
	return 101.5, nil
}

func (getQuote) Idempotent() bool { return true }

// A group that makes up to three attempts of an idempotent command; the
// backoffs here are skipped (Sleep), as a test would.
func Example() {
	reg := command.NewRegistry(command.RegistryConfig{})
	defer reg.Close(context.Background())
	quotes, err := reg.NewGroup("quotes", command.GroupConfig{
		Strategy: command.Semaphore,
		Retry: retry.Config{MaxAttempts: 3,
			Sleep: func(context.Context, time.Duration) error { return nil }},
	})
	if err != nil {
		panic(err)
	}
	var tries int
	v, info, err := command.ExecuteInfo(context.Background(), quotes, getQuote{&tries})
	fmt.Println(v, err, info.Attempts)
	// Output: 101.5 <nil> 3
}
