package fleet

import (
	"context"
	"log/slog"
	"testing"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/internal/redistest"
)

// Run with: go test -run='^$' -bench=Execute -benchmem -count=10 ./fleet/ | benchstat -col /shared -
//
// The same semaphore command with and without its group's breaker attached
// to a running Fleet (syncing every 100 ms with a real Redis): shared state
// must add nothing to a call that succeeds.

type benchCmd struct{}

func (benchCmd) Run(context.Context) (int, error) { return 1, nil }

func BenchmarkExecuteSemaphore(b *testing.B) {
	for _, shared := range []bool{false, true} {
		name := "shared=off"
		if shared {
			name = "shared=on"
		}
		b.Run(name, func(b *testing.B) {
			reg := command.NewRegistry(command.RegistryConfig{Logger: slog.New(slog.DiscardHandler)})
			defer reg.Close(context.Background())
			g, err := reg.NewGroup("bench", command.GroupConfig{Strategy: command.Semaphore, MaxConcurrent: 64,
				Timeout: command.NoTimeout})
			if err != nil {
				b.Fatal(err)
			}
			if shared {
				f, err := New(Config{Addr: redistest.Shared(b), Service: service(b), Interval: testInterval,
					Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				if err := f.Attach(g.Breaker(), "bench", ""); err != nil {
					b.Fatal(err)
				}
				if err := f.Start(); err != nil {
					b.Fatal(err)
				}
				defer f.Close()
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := command.Execute(ctx, g, benchCmd{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
