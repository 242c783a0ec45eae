package alert

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// TestMain checks that no test leaves a goroutine behind (a Watcher's
// included). IgnoreCurrent skips the goroutines ants' package init starts
// for its default pool.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

// newWatcher returns the Watcher of cfg, failing the test if cfg is
// refused.
func newWatcher(t testing.TB, cfg Config) *Watcher {
	t.Helper()
	w, err := New(cfg)
	require.NoError(t, err)
	return w
}

// newTestGroup creates the group "deps" in a registry on a manual clock
// (never advanced unless a test does) with a silent logger; the registry
// is closed with the test.
func newTestGroup(t testing.TB, cfg command.GroupConfig) (*command.Group, *metrics.ManualClock) {
	t.Helper()
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("deps", cfg)
	require.NoError(t, err)
	return g, clock
}

// failing returns a command named name whose Run fails with err, without
// a fallback.
func failing(name string, err error) command.FuncCommand[int] {
	return command.Func(name, func(context.Context) (int, error) { return 0, err }, nil)
}

// degrading returns a command named name whose Run fails with err and
// whose fallback answers 0.
func degrading(name string, err error) command.FuncCommand[int] {
	return command.Func(name, func(context.Context) (int, error) { return 0, err },
		func(context.Context, error) (int, error) { return 0, nil })
}

// succeeding returns a command named name whose Run answers 1.
func succeeding(name string) command.FuncCommand[int] {
	return command.Func(name, func(context.Context) (int, error) { return 1, nil }, nil)
}

// commandSnapshot returns the snapshot of g's command name.
func commandSnapshot(t testing.TB, g *command.Group, name string) command.CommandSnapshot {
	t.Helper()
	for _, c := range g.Snapshot().Commands {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no command %q in group %q", name, g.Name())
	return command.CommandSnapshot{}
}

// checkReturns runs w.Check, failing the test with why if it has not
// returned after 10 seconds.
func checkReturns(t *testing.T, w *Watcher, why string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Check()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal(why)
	}
}
