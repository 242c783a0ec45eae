package fleet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/internal/redistest"
)

// The probe lease holder renewed its lease at every sync whether or not it
// probed: after the dependency recovered, the other instance made 2,641
// calls in 6 s, none reached the dependency, and both stayed half-open
// (issue 22). A holder that sends no probe lets the lease go, and an
// instance with traffic takes it and probes.
func TestFleetIdleLeaseHolderLetsOthersProbe(t *testing.T) {
	// A timeout that no slow sync reaches: degraded, every instance would
	// probe alone and hide the lease.
	ins := fleetOf(t, redistest.Shared(t), 2, breakerConfig(300*time.Millisecond), func(c *Config) { c.Timeout = time.Second })
	a, b := ins[0], ins[1]
	for range 5 {
		b.call(true)
	}
	for a.state() == circuit.Closed {
		a.call(true)
	}
	eventually(t, 2*time.Second, allIn(ins, circuit.Open), "fleet not open")
	eventually(t, 2*time.Second, func() bool { return a.state() == circuit.HalfOpen }, "a not half-open")
	a.until(t, 5*time.Second, false, func() bool { return a.member().prober.Load() }, "a never got the probe lease")
	require.Less(t, a.g.Breaker().Snapshot().ProbeSuccesses, 3, "a is still half-open")
	// a goes idle; b has traffic.
	b.until(t, 3*time.Second, false, func() bool { return b.state() == circuit.Closed }, "b never probed: recovery stalled")
	require.Equal(t, circuit.ReasonProbesSucceeded, b.reasons()[len(b.reasons())-1])
	eventually(t, time.Second, func() bool { return a.state() == circuit.Closed }, "a did not follow b's close")
	require.Equal(t, ReasonClose, a.reasons()[len(a.reasons())-1])
	for _, in := range ins {
		in.conserved(t)
	}
}
