package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/throttle"
	"github.com/bulwark-go/bulwark/metrics"
)

// A dependency that can take 50 calls a second, offered 200: with the
// client-side throttle on (K = 2), the group refuses part of the load
// itself (THROTTLED: never sent, never counted by the breakers), and what
// it sends settles near K × the 50 the dependency accepts, instead of all
// 200. The draws come from a seeded source: the same run every time.
func Example() {
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	defer reg.Close(context.Background())
	draws := rand.New(rand.NewPCG(1, 2))
	g, err := reg.NewGroup("search", command.GroupConfig{
		Strategy:       command.Semaphore,
		Breaker:        circuit.Config{Mode: circuit.ObserveOnly}, // overload, not outage: the breakers only watch
		CommandBreaker: circuit.Config{Mode: circuit.ObserveOnly},
		Throttle:       throttle.Config{K: 2, Rand: draws.Float64},
	})
	if err != nil {
		panic(err)
	}
	var second, taken, sent int // the dependency's second, and the calls it took and got in it
	query := command.Func("query", func(context.Context) (string, error) {
		if s := int(clock.Now() / time.Second); s != second {
			second, taken, sent = s, 0, 0
		}
		sent++
		if taken == 50 {
			return "", errors.New("503: overloaded")
		}
		taken++
		return "results", nil
	}, nil)
	for i := range 200 * 30 { // 200 calls a second for 30 s
		clock.Set(time.Duration(i) * time.Second / 200)
		_, _, _ = command.ExecuteInfo(context.Background(), g, query)
	}
	t := g.Snapshot().Throttle
	fmt.Printf("last second: %d calls sent of 200, %d accepted\n", sent, taken)
	fmt.Printf("window: %d requests, %d accepted, throttle refuses %.0f%%\n", t.Requests, t.Accepts, 100*t.Probability)
	// Output:
	// last second: 97 calls sent of 200, 50 accepted
	// window: 2000 requests, 500 accepted, throttle refuses 50%
}
