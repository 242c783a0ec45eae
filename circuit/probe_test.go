package circuit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPermitIsProbeOnlyInHalfOpen checks that only the permits the
// half-open state hands out say they are probes: closed, forced-closed and
// observe-only admissions are not.
func TestPermitIsProbeOnlyInHalfOpen(t *testing.T) {
	r := newRig(t, Config{MinRequests: 1, OpenDuration: time.Second, HalfOpenSuccesses: 1})
	p, err := r.b.Allow()
	require.NoError(t, err)
	require.False(t, p.IsProbe(), "closed")
	p.Record(Failure, 0)
	require.Equal(t, Open, r.b.State())

	r.clock.Advance(time.Second)
	p, err = r.b.Allow()
	require.NoError(t, err)
	require.True(t, p.IsProbe(), "half-open")
	p.Record(Success, 0)
	require.Equal(t, Closed, r.b.State())

	p, err = r.b.Allow()
	require.NoError(t, err)
	require.False(t, p.IsProbe(), "closed again")
	p.Record(Success, 0)

	r.b.SetMode(ForcedClosed)
	p, _ = r.b.Allow()
	require.False(t, p.IsProbe(), "forced closed")
	require.False(t, Permit{}.IsProbe(), "zero permit")
}
