package circuit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/breaker"
	"github.com/bulwark-go/bulwark/metrics"
)

// TestPermitIsProbeOnlyInHalfOpen checks that only the permits the
// half-open state hands out say they are probes: closed, forced-closed and
// observe-only admissions are not.
func TestPermitIsProbeOnlyInHalfOpen(t *testing.T) {
	r := newRig(t, Config{MinRequests: 1, OpenDuration: time.Second, HalfOpenSuccesses: 1})
	p, err := r.b.Allow()
	require.NoError(t, err)
	require.False(t, breaker.Permit(p).IsProbe(), "closed")
	p.Record(metrics.Failure, 0)
	require.Equal(t, Open, r.b.State())

	r.clock.Advance(time.Second)
	p, err = r.b.Allow()
	require.NoError(t, err)
	require.True(t, breaker.Permit(p).IsProbe(), "half-open")
	p.Record(metrics.Success, 0)
	require.Equal(t, Closed, r.b.State())

	p, err = r.b.Allow()
	require.NoError(t, err)
	require.False(t, breaker.Permit(p).IsProbe(), "closed again")
	p.Record(metrics.Success, 0)

	r.b.SetMode(ForcedClosed)
	p, _ = r.b.Allow()
	require.False(t, breaker.Permit(p).IsProbe(), "forced closed")
	require.False(t, breaker.Permit{}.IsProbe(), "zero permit")
}
