package command

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/bulwark-go/bulwark/metrics"
)

// TestMain checks that no test leaves a goroutine behind. IgnoreCurrent
// skips the goroutines ants' package init starts for its default pool.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// lateTimeout is the timeout of a test whose Run must start and then
// outlive the deadline: long enough that Run starts before it on a loaded
// machine (a deadline that passes while the call waits for the bulkhead is
// QUEUE_TIMEOUT or CANCELLED, and Run never runs), short enough to keep the
// test quick.
const lateTimeout = 500 * time.Millisecond

// receive returns the next value from ch, failing the test at once if none
// comes within 10 s: a test never waits on a channel without a bound. what
// names the awaited value in the failure.
func receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10 s", what)
		var zero T
		return zero
	}
}

// newTestRegistry returns a registry on a manual clock (never advanced
// unless a test does) with a silent logger; it is closed with the test.
func newTestRegistry(t testing.TB) (*Registry, *metrics.ManualClock) {
	t.Helper()
	clock := new(metrics.ManualClock)
	reg := NewRegistry(RegistryConfig{Clock: clock, Logger: discardLogger})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	return reg, clock
}

// newTestGroup creates a group in a fresh test registry.
func newTestGroup(t testing.TB, cfg GroupConfig) (*Group, *metrics.ManualClock) {
	t.Helper()
	reg, clock := newTestRegistry(t)
	g, err := reg.NewGroup("deps", cfg)
	require.NoError(t, err)
	return g, clock
}

// op is a test command without a fallback: Run calls run.
type op[T any] struct {
	name string
	run  func(ctx context.Context) (T, error)
}

func (o op[T]) Name() string                       { return o.name }
func (o op[T]) Run(ctx context.Context) (T, error) { return o.run(ctx) }

// opFB is a test command with a fallback.
type opFB[T any] struct {
	op[T]
	fb func(ctx context.Context, err error) (T, error)
}

func (o opFB[T]) Fallback(ctx context.Context, err error) (T, error) { return o.fb(ctx, err) }

func succeed[T any](v T) func(context.Context) (T, error) {
	return func(context.Context) (T, error) { return v, nil }
}

func fail[T any](err error) func(context.Context) (T, error) {
	return func(context.Context) (T, error) {
		var zero T
		return zero, err
	}
}

// waitDone blocks until ctx ends and returns its error.
func waitDone[T any](ctx context.Context) (T, error) {
	var zero T
	<-ctx.Done()
	return zero, ctx.Err()
}

// counts returns the command's window counts now.
func counts(t testing.TB, g *Group, name string) metrics.Counts {
	t.Helper()
	c := g.commands.Load().names.get(name)
	require.NotNil(t, c, "command %q", name)
	return c.metrics.Counts(g.clock.Now())
}
