package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/isolation"
)

func bulwarkSubjects() []subject {
	return []subject{bulwarkSubject("bulwark pool", command.Thread), bulwarkSubject("bulwark semaphore", command.Semaphore)}
}

// workCmd is a bulwark command that runs the probe's work.
type workCmd struct{ work func(context.Context) }

func (c workCmd) Run(ctx context.Context) (struct{}, error) {
	c.work(ctx)
	return struct{}{}, nil
}

// bulwarkSubject: one group per instance with MaxConcurrent = limit (no queue) and the timeout;
// both breakers are forced closed so that the timeouts of this test never open them.
func bulwarkSubject(name string, strategy command.Strategy) subject {
	var seq atomic.Int64
	return subject{name: name, open: func(limit int, to time.Duration) (instance, error) {
		reg := command.NewRegistry(command.RegistryConfig{Logger: slog.New(slog.DiscardHandler)})
		g, err := reg.NewGroup(fmt.Sprintf("timeouts-%d", seq.Add(1)), command.GroupConfig{
			Strategy:       strategy,
			MaxConcurrent:  limit,
			Timeout:        to,
			Breaker:        circuit.Config{Mode: circuit.ForcedClosed},
			CommandBreaker: circuit.Config{Mode: circuit.ForcedClosed},
		})
		if err != nil {
			return instance{}, err
		}
		return instance{
			call: func(ctx context.Context, work func(context.Context)) error {
				_, err := command.Execute[struct{}](ctx, g, workCmd{work})
				return err
			},
			classify: func(err error) string {
				switch {
				case err == nil:
					return outOK
				case errorsIs(err, command.ErrTimeout):
					return outTimeout
				case errorsIs(err, isolation.ErrRejected):
					return outRejected
				}
				return outOther
			},
			close: func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_ = reg.Close(ctx)
			},
		}, nil
	}}
}
