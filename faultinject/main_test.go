package faultinject

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

// newTestGroup returns a semaphore group named deps in a registry on a
// manual clock with a silent logger, closed with the test.
func newTestGroup(t testing.TB, cfg command.GroupConfig) *command.Group {
	t.Helper()
	reg := command.NewRegistry(command.RegistryConfig{Clock: new(metrics.ManualClock), Logger: discardLogger})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	cfg.Strategy = command.Semaphore
	g, err := reg.NewGroup("deps", cfg)
	require.NoError(t, err)
	return g
}

// newEnabled returns enabled Faults with cfg.
func newEnabled(t testing.TB, cfg Config) *Faults {
	t.Helper()
	f, err := New(cfg)
	require.NoError(t, err)
	f.Enable()
	return f
}
