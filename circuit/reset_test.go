package circuit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Reset is one transition, from any state, with its own reason: the
// window is cleared and the backoff reset.
func TestResetFromEveryState(t *testing.T) {
	cfg := Config{MinRequests: 2, OpenDuration: time.Second, OpenBackoff: 2, HalfOpenSuccesses: 2}
	r := newRig(t, cfg)
	r.run("f f =open +1s h =half-open rf =open")
	require.Equal(t, 2*time.Second, r.b.Snapshot().OpenDuration)
	r.b.Reset()
	s := r.b.Snapshot()
	require.Equal(t, Closed, s.State)
	require.Equal(t, Normal, s.Mode)
	require.Equal(t, time.Second, s.OpenDuration, "backoff reset")
	require.Equal(t, ReasonReset, s.Transitions[len(s.Transitions)-1].Reason)
	r.run("f =closed") // window cleared: one failure is below MinRequests

	r.run("f =open +1s h =half-open")
	n := len(r.transitions())
	r.b.Reset()
	require.Len(t, r.transitions(), n+1, "one transition")
	tr := r.transitions()[n]
	require.Equal(t, HalfOpen, tr.From)
	require.Equal(t, Closed, tr.To)
	r.run("rf =closed") // the half-open probe is stale: not counted

	r.run("f")
	r.b.Reset()
	tr = r.transitions()[len(r.transitions())-1]
	require.Equal(t, Closed, tr.From, "reported from closed too")
	require.Equal(t, ReasonReset, tr.Reason)
	require.Equal(t, int64(1), tr.Health.Requests, "the window it cleared")
	require.Equal(t, Health{}, r.b.Snapshot().Health)
}

func TestResetLeavesForcedModesKeepsObserveOnly(t *testing.T) {
	r := newRig(t, Config{MinRequests: 1, OpenDuration: time.Second})
	r.run("@forced-open x")
	r.b.Reset()
	require.Equal(t, Normal, r.b.Snapshot().Mode)
	r.run("=closed s")
	r.run("@forced-closed")
	r.b.Reset()
	require.Equal(t, Normal, r.b.Snapshot().Mode)
	r.run("f =open")
	r.run("@observe-only")
	r.b.Reset()
	require.Equal(t, ObserveOnly, r.b.Snapshot().Mode)
	r.run("=closed")
}

func TestResetStartsNoRampUp(t *testing.T) {
	r := newRig(t, Config{MinRequests: 1, OpenDuration: time.Second, RampDuration: time.Minute, RampFloor: 0.1})
	r.run("f =open")
	r.b.Reset()
	require.Equal(t, 1.0, r.b.Snapshot().RampShare)
	r.run("10*s")
}
