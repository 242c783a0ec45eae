package httpguard

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// TestMain checks that no test leaves a goroutine behind. IgnoreCurrent
// skips the goroutines ants' package init starts for its default pool.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// newTestRegistry returns a registry on clock (a new manual clock if nil)
// with a silent logger; it is closed with the test.
func newTestRegistry(t testing.TB, clock metrics.Clock) *command.Registry {
	t.Helper()
	if clock == nil {
		clock = new(metrics.ManualClock)
	}
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: discardLogger})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	return reg
}

// counts returns the cumulative counts of the named command of g.
func counts(t testing.TB, g *command.Group, name string) metrics.Counts {
	t.Helper()
	for _, c := range g.Snapshot().Commands {
		if c.Name == name {
			return c.Metrics.Cumulative
		}
	}
	t.Fatalf("group %s has no command %q", g.Name(), name)
	return metrics.Counts{}
}
