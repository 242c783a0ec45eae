package browsertest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// shared is a command whose calls all share one key; its Run answers once
// every other call has joined its flight (wait).
type shared struct{ wait func() }

func (shared) Name() string { return "Profile" }
func (shared) Key() string  { return "7" }
func (s shared) Run(context.Context) (int, error) {
	s.wait()
	return 7, nil
}

// TestBrowserCoalescedCounter: 20 concurrent calls of one key make one Run;
// the tile's "Coalesced" counter shows the 19 that shared it, and Success
// the one Run. The registry runs on a manual clock
// that never moves, so the window keeps every call.
func TestBrowserCoalescedCounter(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped in -short mode")
	}
	ctx := startChromium(t)
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { assert.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("users", command.GroupConfig{Strategy: command.Semaphore, Timeout: command.NoTimeout,
		Commands: map[string]command.CommandConfig{"Profile": {Coalesce: true}}})
	require.NoError(t, err)
	const calls = 20
	// The leader's Run waits until the other calls have joined its flight
	// (Coalescing), not merely until they are in flight: a call counted in
	// flight that had not reached the flight yet when Run returned would
	// start a flight of its own, whose Run would wait for ever.
	everyone := func() {
		for g.Snapshot().Commands[0].Coalescing < calls-1 {
			time.Sleep(time.Millisecond)
		}
	}
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			_, err := command.Execute(context.Background(), g, shared{everyone})
			assert.NoError(t, err)
		})
	}
	wg.Wait()

	tileShows(t, ctx, reg, "Profile", "coalesced", "Coalesced", map[string]int{"coalesced": calls - 1, "success": 1})
}
