package gmbridge

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	gometrics "github.com/rcrowley/go-metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/retry"
)

// gauge and counter read the named metric of gm, failing the test if it
// is missing or of another kind.
func gauge(t *testing.T, gm gometrics.Registry, name string) int64 {
	t.Helper()
	m, ok := gm.Get(name).(gometrics.Gauge)
	require.True(t, ok, "gauge %s", name)
	return m.Value()
}

func counter(t *testing.T, gm gometrics.Registry, name string) int64 {
	t.Helper()
	m, ok := gm.Get(name).(gometrics.Counter)
	require.True(t, ok, "counter %s", name)
	return m.Count()
}

func TestExport(t *testing.T) {
	reg, b, _ := newRegistry(t, quiet)
	gm := b.Registry()
	g, err := reg.NewGroup("users", command.GroupConfig{Strategy: command.Semaphore})
	require.NoError(t, err)
	ctx := context.Background()
	for range 3 {
		_, _ = command.Execute(ctx, g, degrading("get"))
	}
	_, _ = command.Execute(ctx, g, ok("get"))

	assert.Equal(t, int64(3), gauge(t, gm, "command.users.get.rolling.failure"))
	assert.Equal(t, int64(1), gauge(t, gm, "command.users.get.cumulative.success"))
	assert.Equal(t, int64(4), counter(t, gm, "command.users.get.calls"))
	assert.Equal(t, int64(3), counter(t, gm, "command.users.get.degraded"))
	assert.Zero(t, gauge(t, gm, "command.users.get.inflight"))
	assert.Equal(t, int64(circuit.Closed), gauge(t, gm, "command.users.get.circuit.state"))
	assert.Equal(t, int64(4), gauge(t, gm, "command.users.get.total_ns.count"))
	assert.Equal(t, int64(3), gauge(t, gm, "group.users.rolling.fallback_success"))
	assert.Equal(t, int64(1), gauge(t, gm, "group.users.rolling.max"))
	assert.Nil(t, gm.Get("group.users.total_ns.p99"), "a group records no latencies, so it publishes none")
	assert.Equal(t, int64(10), gauge(t, gm, "group.users.bulkhead.capacity"))
	assert.Equal(t, int64(4), counter(t, gm, "group.users.bulkhead.completed"))
	gm.Each(func(name string, m any) {
		_, isMeter := m.(gometrics.Meter)
		assert.False(t, isMeter, "%s: no Meter (its ticker goroutine never exits)", name)
	})

	g.Breaker().SetMode(circuit.ForcedOpen)
	assert.Equal(t, int64(circuit.Open), gauge(t, gm, "group.users.circuit.state"))
	assert.Zero(t, counter(t, gm, "group.users.config.generation"))
	require.NoError(t, g.Reconfigure(g.Config()))
	assert.Equal(t, int64(1), counter(t, gm, "group.users.config.generation"))

	require.NoError(t, reg.Close(ctx))
	assert.Empty(t, gm.GetAll(), "Close removes every metric")
}

// TestOneSnapshotPerCycle: the gauges of a group and its commands read one
// snapshot per reporting cycle; a gauge read again starts a fresh one.
func TestOneSnapshotPerCycle(t *testing.T) {
	reg, b, _ := newRegistry(t, quiet)
	gm := b.Registry()
	g, err := reg.NewGroup("users", command.GroupConfig{Strategy: command.Semaphore})
	require.NoError(t, err)
	_, err = command.Execute(context.Background(), g, ok("get"))
	require.NoError(t, err)
	c := b.groups[g].cache
	before := c.cycle
	gm.Each(func(name string, m any) {
		if g, ok := m.(gometrics.Gauge); ok {
			_ = g.Value()
		}
	})
	assert.Equal(t, before+1, c.cycle, "every gauge once: one snapshot")

	_, err = command.Execute(context.Background(), g, ok("get"))
	require.NoError(t, err)
	assert.Equal(t, int64(2), gauge(t, gm, "command.users.get.rolling.success"), "read again: a fresh snapshot")
	assert.Equal(t, before+2, c.cycle)
}

func TestPrivateRegistryByDefault(t *testing.T) {
	reg, b, _ := newRegistry(t, quiet)
	_, err := reg.NewGroup("private", command.GroupConfig{Strategy: command.Semaphore})
	require.NoError(t, err)
	assert.NotSame(t, gometrics.DefaultRegistry, b.Registry())
	assert.Nil(t, gometrics.DefaultRegistry.Get("group.private.rolling.success"))
	assert.NotNil(t, b.Registry().Get("group.private.rolling.success"))
}

func TestNameClash(t *testing.T) {
	gm := gometrics.NewRegistry()
	require.NoError(t, gm.Register("group.taken.bulkhead.active", gometrics.NewCounter()))
	require.NoError(t, gm.Register("command.ok.get.calls", gometrics.NewCounter()))
	var logs bytes.Buffer
	reg := command.NewRegistry(command.RegistryConfig{Exporter: New(gm), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer reg.Close(context.Background())

	_, err := reg.NewGroup("taken", command.GroupConfig{Strategy: command.Semaphore})
	require.ErrorContains(t, err, "group.taken.bulkhead.active", "a group whose metrics cannot be exported is not created")
	_, found := reg.Group("taken")
	assert.False(t, found)
	assert.Nil(t, gm.Get("group.taken.rolling.success"), "what was registered before the clash is removed")

	g, err := reg.NewGroup("ok", command.GroupConfig{Strategy: command.Semaphore})
	require.NoError(t, err)
	_, err = command.Execute(context.Background(), g, ok("get"))
	assert.NoError(t, err, "a command whose metrics clash still runs")
	assert.Contains(t, logs.String(), "command metrics not exported")
	assert.Nil(t, gm.Get("command.ok.get.rolling.success"), "none of its metrics is left")
}

// TestNamesDoNotCollide: group "a.b" with command "c" and group "a" with
// command "b.c" get distinct go-metrics names, and closing one group
// leaves the other's metrics in place.
func TestNamesDoNotCollide(t *testing.T) {
	var logs bytes.Buffer
	reg, b, _ := newRegistry(t, slog.New(slog.NewTextHandler(&logs, nil)))
	gm := b.Registry()
	ab, err := reg.NewGroup("a.b", command.GroupConfig{Strategy: command.Semaphore})
	require.NoError(t, err)
	a, err := reg.NewGroup("a", command.GroupConfig{Strategy: command.Semaphore})
	require.NoError(t, err)
	_, err = command.Execute(context.Background(), ab, ok("c"))
	require.NoError(t, err)
	_, err = command.Execute(context.Background(), a, ok("b.c"))
	require.NoError(t, err)
	assert.Empty(t, logs.String(), "no export failed")

	assert.Equal(t, int64(1), counter(t, gm, "command.a%2Eb.c.calls"))
	assert.Equal(t, int64(1), counter(t, gm, "command.a.b%2Ec.calls"))
	assert.NotNil(t, gm.Get("group.a%2Eb.bulkhead.active"))

	require.NoError(t, a.Close(context.Background()))
	assert.Nil(t, gm.Get("command.a.b%2Ec.calls"))
	assert.Nil(t, gm.Get("group.a.bulkhead.active"))
	assert.Equal(t, int64(1), counter(t, gm, "command.a%2Eb.c.calls"), "a.b's metrics stay")
	assert.NotNil(t, gm.Get("group.a%2Eb.bulkhead.active"))

	assert.Equal(t, "command.100%25.x%2Ey", Name("command", "100%", "x.y"))
}

// TestRenamedNamesAreBounded: the names of commands renamed for being too
// long or not valid UTF-8 (command.MaxNameLength) give go-metrics names
// that are valid UTF-8 and bounded.
func TestRenamedNamesAreBounded(t *testing.T) {
	reg, b, _ := newRegistry(t, quiet)
	g, err := reg.NewGroup("deps", command.GroupConfig{Strategy: command.Semaphore})
	require.NoError(t, err)
	for _, name := range []string{strings.Repeat("é", command.MaxNameLength), "caf\xe9"} {
		_, err := command.Execute(context.Background(), g, ok(name))
		require.NoError(t, err)
	}
	require.Equal(t, 2, g.Snapshot().RenamedCommands)
	for name := range b.Registry().GetAll() {
		assert.True(t, utf8.ValidString(name), "go-metrics name %q", name)
		assert.LessOrEqual(t, len(name), 2*command.MaxNameLength+64, "go-metrics name %.80q...", name)
	}
}

// TestRetriedCountsAndCallers: the gauges of the command and of its group
// include RETRIED, rolling and cumulative, and the calls counter counts a
// retried call once.
func TestRetriedCountsAndCallers(t *testing.T) {
	reg, b, _ := newRegistry(t, quiet)
	g, err := reg.NewGroup("deps", command.GroupConfig{Strategy: command.Semaphore,
		Retry: retry.Config{MaxAttempts: 3, NoBudget: true, Sleep: func(context.Context, time.Duration) error { return nil }}})
	require.NoError(t, err)
	_, err = command.Execute(context.Background(), g, idempotent{degrading("get")})
	require.NoError(t, err)
	for _, name := range []string{"command.deps.get.rolling.retried", "command.deps.get.cumulative.retried",
		"group.deps.rolling.retried", "group.deps.cumulative.retried"} {
		assert.EqualValues(t, 2, gauge(t, b.Registry(), name), name)
	}
	assert.EqualValues(t, 1, counter(t, b.Registry(), "command.deps.get.calls"))
	assert.EqualValues(t, 3, gauge(t, b.Registry(), "command.deps.get.cumulative.failure"), "three attempts")
}

// idempotent makes a command retryable (command.Idempotent).
type idempotent struct{ command.FuncCommand[int] }

func (idempotent) Idempotent() bool { return true }
