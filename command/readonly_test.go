package command

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/logtest"
	"github.com/bulwark-go/bulwark/metrics"
)

// writeOp is a test command that is a write when write says so.
type writeOp struct {
	op[int]
	write bool
}

func (w writeOp) Write() bool { return w.write }

// writeFB is a write with a fallback that defers it.
type writeFB struct{ writeOp }

func (writeFB) Fallback(context.Context, error) (int, error) { return 0, ErrDeferred }

// TestReadOnlyRefusesWritesServesReads: in a read-only group a write is
// refused before Run as READ_ONLY with ErrRefused, not counted by the
// breakers, while reads (no Write method, or Write false) go on; a write
// with a deferring fallback is deferred; turning the mode off lets writes
// through again.
func TestReadOnlyRefusesWritesServesReads(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, ReadOnly: true})
	ran := 0
	run := func(context.Context) (int, error) { ran++; return 1, nil }

	_, info, err := ExecuteInfo(context.Background(), g, writeOp{op[int]{"put", run}, true})
	require.ErrorIs(t, err, ErrRefused)
	assert.Equal(t, metrics.ReadOnly, info.Event)
	assert.True(t, info.Events.Has(metrics.FallbackMissing))
	assert.Zero(t, ran, "a refused write never runs")
	assert.Contains(t, err.Error(), "read_only")

	for _, read := range []Runner[int]{op[int]{"get", run}, writeOp{op[int]{"scan", run}, false}, Func("fn", run, nil)} { // a Func is a read
		v, err := Execute(context.Background(), g, read)
		require.NoError(t, err)
		assert.Equal(t, 1, v)
	}
	assert.Equal(t, 3, ran)

	_, info, err = ExecuteInfo(context.Background(), g, writeFB{writeOp{op[int]{"order", run}, true}})
	require.NoError(t, err)
	assert.True(t, info.Events.Has(metrics.DegradedDeferred))
	assert.Equal(t, 3, ran)

	c := counts(t, g, "put")
	assert.EqualValues(t, 1, c[metrics.ReadOnly])
	b, _ := g.CommandBreaker("put")
	assert.Zero(t, b.Snapshot().Health.Requests, "the breaker does not count our own refusal")
	assert.EqualValues(t, 3, g.Breaker().Snapshot().Health.Requests, "the group breaker counted the three reads only")

	require.NoError(t, g.Reconfigure(changed(g, func(c *GroupConfig) { c.ReadOnly = false })))
	_, err = Execute(context.Background(), g, writeOp{op[int]{"put", run}, true})
	require.NoError(t, err)
	assert.Equal(t, 4, ran)
}

// TestRegistryReadOnlySwitch: the registry's switch reaches every group,
// those created later too, and turning it off leaves a group whose own
// ReadOnly is set read-only.
func TestRegistryReadOnlySwitch(t *testing.T) {
	var logs logtest.Buffer
	reg := NewRegistry(RegistryConfig{Clock: new(metrics.ManualClock), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	a, err := reg.NewGroup("a", GroupConfig{Strategy: Semaphore})
	require.NoError(t, err)
	own, err := reg.NewGroup("own", GroupConfig{Strategy: Semaphore, ReadOnly: true})
	require.NoError(t, err)
	put := writeOp{op[int]{"put", succeed(1)}, true}
	_, err = Execute(context.Background(), a, put) // the command exists before the switch
	require.NoError(t, err)

	reg.SetReadOnly(true)
	reg.SetReadOnly(true) // no change: logged once
	later, err := reg.NewGroup("later", GroupConfig{Strategy: Semaphore})
	require.NoError(t, err)
	for _, g := range []*Group{a, own, later} {
		_, err := Execute(context.Background(), g, put)
		require.ErrorIs(t, err, ErrRefused, g.Name())
		_, err = Execute(context.Background(), g, op[int]{"get", succeed(1)})
		require.NoError(t, err, g.Name())
	}
	assert.Equal(t, 1, strings.Count(logs.String(), "registry read-only"))

	reg.SetReadOnly(false)
	_, err = Execute(context.Background(), a, put)
	require.NoError(t, err)
	_, err = Execute(context.Background(), later, put)
	require.NoError(t, err)
	_, err = Execute(context.Background(), own, put)
	require.ErrorIs(t, err, ErrRefused, "the group's own ReadOnly stays")
}

// TestReadOnlyWritePanics: a Write method that panics judges the call a
// write (refused) and is logged; the call still ends with one outcome.
func TestReadOnlyWritePanics(t *testing.T) {
	var logs logtest.Buffer
	reg := NewRegistry(RegistryConfig{Clock: new(metrics.ManualClock), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("g", GroupConfig{Strategy: Semaphore, ReadOnly: true})
	require.NoError(t, err)
	_, info, err := ExecuteInfo(context.Background(), g, panicWrite{op[int]{"w", succeed(1)}})
	require.ErrorIs(t, err, ErrRefused)
	assert.Equal(t, metrics.ReadOnly, info.Event)
	assert.Contains(t, logs.String(), "Write")
}

type panicWrite struct{ op[int] }

func (panicWrite) Write() bool { panic("boom") }

// TestReadOnlyOffCostsNothingForWrites: with read-only mode off, a write
// runs as any call, Write is never asked.
func TestReadOnlyOffCostsNothingForWrites(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore})
	_, err := Execute(context.Background(), g, panicWrite{op[int]{"w", succeed(1)}})
	require.NoError(t, err, "outside read-only mode Write is not called")
}
