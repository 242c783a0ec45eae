package fleet

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/metrics"
)

// sparseBreaker returns a breaker that trips on one failure and closes on
// one probe after 100 ms.
func sparseBreaker(t *testing.T) *circuit.Breaker {
	t.Helper()
	b, err := circuit.New(circuit.Config{
		Name:              "dep",
		Window:            metrics.Window{Length: time.Second, Buckets: 10},
		MinRequests:       1,
		OpenDuration:      100 * time.Millisecond,
		HalfOpenSuccesses: 1,
		Logger:            slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	return b
}

// recovers fails a call through b, waits out the open duration and
// reports whether a successful probe closes it again.
func recovers(t *testing.T, b *circuit.Breaker) bool {
	t.Helper()
	p, err := b.Allow()
	require.NoError(t, err)
	p.Record(metrics.Failure, time.Millisecond)
	require.Equal(t, circuit.Open, b.State())
	time.Sleep(150 * time.Millisecond)
	p, err = b.Allow()
	if err != nil {
		return false
	}
	p.Record(metrics.Success, time.Millisecond)
	return b.State() == circuit.Closed
}

func newFleet(t *testing.T) *Fleet {
	t.Helper()
	f, err := New(Config{Addr: "127.0.0.1:1", Service: "s", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return f
}

// Close before Start left a probe gate that never opened: the breaker
// stayed half-open refusing every call (issue 22). It judges alone again.
func TestFleetCloseBeforeStartLeavesTheBreakerJudgingAlone(t *testing.T) {
	f := newFleet(t)
	b := sparseBreaker(t)
	require.NoError(t, f.Attach(b, "g", ""))
	require.NoError(t, f.Close())
	require.True(t, recovers(t, b), "the breaker stayed half-open")
	require.Empty(t, b.Snapshot().Shared)
	require.NoError(t, f.Close(), "twice")
	require.ErrorIs(t, f.Start(), ErrClosed)
}

// Attach after Close returned nil and left a probe gate that never opened
// (issue 22). It is an error, and the breaker is left alone.
func TestFleetAttachAfterCloseIsAnError(t *testing.T) {
	f := newFleet(t)
	require.NoError(t, f.Close())
	b := sparseBreaker(t)
	require.ErrorIs(t, f.Attach(b, "g", ""), ErrClosed)
	require.True(t, recovers(t, b), "the breaker stayed half-open")
	g := newFleet(t)
	require.NoError(t, g.Attach(b, "g", ""), "free to join another fleet")
	require.NoError(t, g.Close())
}

// Before its first sync the fleet coordinates nothing: an attached
// breaker probes alone. Redis here is a port nobody listens on.
func TestFleetBreakerProbesAloneUntilASyncWorks(t *testing.T) {
	f := newFleet(t)
	b := sparseBreaker(t)
	require.NoError(t, f.Attach(b, "g", ""))
	require.ErrorContains(t, f.Attach(b, "g", "other"), "has a party already")
	require.True(t, recovers(t, b), "not started yet")
	require.NoError(t, f.Start())
	require.True(t, recovers(t, b), "started, Redis unreachable")
	require.NoError(t, f.Close())
}
