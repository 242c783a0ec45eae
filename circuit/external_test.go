package circuit

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/metrics"
)

func counts(s, f int64) metrics.Counts {
	var c metrics.Counts
	c[metrics.Success], c[metrics.Failure] = s, f
	return c
}

func TestSetExternalTripsOnSum(t *testing.T) {
	r := newRig(t, Config{MinRequests: 10, FailureRatio: 0.5, OpenDuration: time.Second})
	r.run("4*s") // local window alone: 4 calls, below MinRequests
	require.NoError(t, r.b.SetExternal(counts(2, 4), time.Minute))
	r.run("=closed") // 10 calls, 4 failures: 40%
	require.Equal(t, int64(10), r.b.Snapshot().Health.Requests)
	require.Equal(t, int64(6), r.b.Snapshot().External.Requests)
	require.NoError(t, r.b.SetExternal(counts(0, 8), time.Minute))
	// SetExternal judged the sum (12 calls, 8 failures) without a local call.
	r.run("=open x")
	tr := r.transitions()
	require.Len(t, tr, 1)
	require.Equal(t, ReasonErrorRatio, tr[0].Reason)
	require.Equal(t, int64(12), tr[0].Health.Requests)
	// The external failures are not the breaker's own.
	require.Equal(t, int64(0), r.b.LocalWindow()[metrics.Failure])
}

func TestSetExternalExpiresAndRejectsBadInput(t *testing.T) {
	r := newRig(t, Config{MinRequests: 4, OpenDuration: time.Second})
	require.ErrorIs(t, r.b.SetExternal(counts(-1, 0), time.Second), ErrInvalidExternal)
	require.ErrorIs(t, r.b.SetExternal(counts(1, 0), 0), ErrInvalidExternal)
	require.NoError(t, r.b.SetExternal(counts(0, 3), time.Second))
	r.run("+1s f =closed") // expired: one local failure alone does not trip
	require.Equal(t, int64(1), r.b.Snapshot().Health.Requests)
	require.NoError(t, r.b.SetExternal(counts(2, 0), time.Second))
	require.Equal(t, int64(3), r.b.Snapshot().Health.Requests)
	r.b.ClearExternal()
	require.Equal(t, int64(1), r.b.Snapshot().Health.Requests)
}

func TestCloseClearsExternal(t *testing.T) {
	r := newRig(t, Config{MinRequests: 4, OpenDuration: time.Second, HalfOpenSuccesses: 1})
	require.NoError(t, r.b.SetExternal(counts(0, 4), time.Hour))
	r.run("=open +1s s =closed")
	// Old fleet failures must not reopen it at the first local failure.
	r.run("f =closed")
	require.Equal(t, Health{}, r.b.Snapshot().External)
}

func TestOpenByFleet(t *testing.T) {
	r := newRig(t, Config{OpenDuration: time.Second, HalfOpenSuccesses: 1})
	require.True(t, r.b.OpenByFleet())
	r.run("=open x")
	require.False(t, r.b.OpenByFleet(), "already open")
	require.Equal(t, metrics.Counts{}, r.b.LocalWindow(), "not a local failure")
	r.run("+1s h =half-open")
	require.True(t, r.b.OpenByFleet(), "half-open: the fleet's probe failed")
	r.run("=open rs =open")
	r.b.SetMode(ForcedClosed)
	require.False(t, r.b.OpenByFleet(), "forced")
	require.Equal(t, []Reason{ReasonFleetOpen, ReasonOpenElapsed, ReasonFleetOpen, ReasonForced}, r.reasons())
}

func TestCloseByFleet(t *testing.T) {
	r := newRig(t, Config{MinRequests: 2, OpenDuration: time.Second})
	r.run("f f =open")
	require.True(t, r.b.CloseByFleet())
	r.run("=closed f =closed") // window cleared
	require.False(t, r.b.CloseByFleet(), "closed: no transition")
	r.run("f =closed") // but the window was cleared again
	r.run("f =open")
	require.Equal(t, []Reason{ReasonErrorRatio, ReasonFleetClose, ReasonErrorRatio}, r.reasons())
}

// On a closed breaker CloseByFleet clears what closing clears: its own
// window and the external counts.
func TestCloseByFleetWhileClosedClearsExternal(t *testing.T) {
	r := newRig(t, Config{MinRequests: 4, OpenDuration: time.Second})
	r.run("s f")
	require.NoError(t, r.b.SetExternal(counts(2, 0), time.Hour))
	require.Equal(t, int64(4), r.b.Snapshot().Health.Requests)
	require.False(t, r.b.CloseByFleet())
	s := r.b.Snapshot()
	require.Equal(t, Health{}, s.Health)
	require.Equal(t, Health{}, s.External)
	r.run("f f f =closed f =open") // the fourth call is the first verdict
}

func TestProbeGate(t *testing.T) {
	r := newRig(t, Config{MinRequests: 1, OpenDuration: time.Second, HalfOpenSuccesses: 1})
	var open atomic.Bool
	r.b.SetProbeGate(open.Load)
	r.run("f =open +1s x =half-open x")
	_, err := r.b.Allow()
	require.ErrorIs(t, err, ErrProbeLimit)
	open.Store(true)
	r.run("s =closed")
	r.b.SetProbeGate(nil)
	r.run("f =open +1s s =closed")
}

func TestProbeGateObserveOnly(t *testing.T) {
	r := newRig(t, Config{MinRequests: 1, OpenDuration: time.Second, Mode: ObserveOnly})
	r.b.SetProbeGate(func() bool { return false })
	r.run("f =open +1s s s =half-open") // admitted, never probes
}

func TestWatchSeesTransitionsInOrder(t *testing.T) {
	r := newRig(t, Config{MinRequests: 1, OpenDuration: time.Second, HalfOpenSuccesses: 1})
	var seen []Reason
	r.b.Watch(func(tr Transition) { seen = append(seen, tr.Reason) })
	r.run("f +1s s")
	require.Equal(t, []Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonProbesSucceeded}, seen)
	r.b.Watch(nil)
	r.run("f")
	require.Len(t, seen, 3)
}

func TestSharedStatusInSnapshot(t *testing.T) {
	r := newRig(t, Config{})
	require.Empty(t, r.b.Snapshot().Shared)
	r.b.SetSharedStatus(func() string { return "shared state: ok" })
	require.Equal(t, "shared state: ok", r.b.Snapshot().Shared)
	r.b.SetSharedStatus(nil)
	require.Empty(t, r.b.Snapshot().Shared)
}
