package gmbridge

import (
	"context"
	"errors"
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

var quiet = slog.New(slog.DiscardHandler)

var errBoom = errors.New("boom")

// newRegistry returns a registry on a manual clock, exporting through a
// Bridge into a fresh go-metrics registry; it is closed with the test.
func newRegistry(t testing.TB, logger *slog.Logger) (*command.Registry, *Bridge, *metrics.ManualClock) {
	t.Helper()
	clock := new(metrics.ManualClock)
	b := New(nil)
	reg := command.NewRegistry(command.RegistryConfig{Exporter: b, Clock: clock, Logger: logger})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	return reg, b, clock
}

// ok returns a command named name that answers 1.
func ok(name string) command.FuncCommand[int] {
	return command.Func(name, func(context.Context) (int, error) { return 1, nil }, nil)
}

// degrading returns a command named name whose Run fails with errBoom and
// whose fallback answers 0.
func degrading(name string) command.FuncCommand[int] {
	return command.Func(name, func(context.Context) (int, error) { return 0, errBoom },
		func(context.Context, error) (int, error) { return 0, nil })
}
