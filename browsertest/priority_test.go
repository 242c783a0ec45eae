package browsertest

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/priority"
	"github.com/bulwark-go/bulwark/metrics"
)

// TestBrowserShedCounter: a command whose P3 calls priority shedding
// refuses shows them in the tile's "Shed" counter (and, as the Hystrix
// event counts them, among the rejections). Two calls hold half of a
// bulkhead of 4, so every P3 call is shed; the registry runs on a manual
// clock that never moves, so the window keeps every call.
func TestBrowserShedCounter(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped in -short mode")
	}
	ctx := startChromium(t)
	reg := command.NewRegistry(command.RegistryConfig{Clock: new(metrics.ManualClock), Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { assert.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("reports", command.GroupConfig{Strategy: command.Semaphore, MaxConcurrent: 4, Timeout: command.NoTimeout,
		Priority: priority.Config{Reserve: [4]float64{0, 0.1, 0.25, 0.5}}})
	require.NoError(t, err)
	release, started, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	for range 2 {
		go func() {
			defer func() { done <- struct{}{} }()
			_, _ = command.Execute(context.Background(), g, command.Func("Hold", func(context.Context) (int, error) {
				started <- struct{}{}
				<-release
				return 1, nil
			}, nil))
		}()
		<-started
	}
	const calls = 5
	export := command.Func("Export", func(context.Context) (int, error) { return 1, nil },
		func(context.Context, error) (int, error) { return 0, nil })
	for range calls {
		_, info, err := command.ExecuteInfo(context.Background(), g, export, command.WithPriority(priority.P3))
		require.NoError(t, err)
		require.Equal(t, metrics.PriorityRejected, info.Event)
	}
	close(release)
	<-done
	<-done

	tileShows(t, ctx, reg, "Export", "priority-rejected", "Shed", map[string]int{"priority-rejected": calls, "rejected": calls})
}
