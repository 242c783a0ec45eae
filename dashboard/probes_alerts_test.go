package dashboard

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/metrics"
)

// TestStreamNativeProbesAndAlerts: the native events carry the probe
// counts, the alert tier and the degraded alarm; the Hystrix events are
// unchanged by them.
func TestStreamNativeProbesAndAlerts(t *testing.T) {
	snap := sampleSnapshot()
	users := &snap.Groups[1]
	users.AlertTier = "P1"
	users.Commands[0].AlertTier = "P2"
	users.Commands[0].DegradedAlarm = true
	src := &fakeSource{snap: snap}
	_, ts := newTestStream(t, src, Config{})
	c := openStream(t, newTestClient(), ts.URL)
	defer c.Close()
	f, err := c.sse.frame()
	require.NoError(t, err)

	ev := f.find(TypeBulwarkCommand, users.Commands[0].Name, "users")
	require.NotNil(t, ev)
	assert.EqualValues(t, metrics.Probe+1, num(ev["rollingCountProbe"]))
	assert.EqualValues(t, metrics.ProbeSuccess+1, num(ev["rollingCountProbeSuccess"]))
	assert.EqualValues(t, metrics.ProbeFailure+1, num(ev["rollingCountProbeFailure"]))
	assert.Equal(t, "P2", ev["alertTier"])
	assert.Equal(t, true, ev["degradedAlarm"])

	other := f.find(TypeBulwarkCommand, users.Commands[1].Name, "users")
	require.NotNil(t, other)
	assert.Equal(t, "", other["alertTier"])
	assert.Equal(t, false, other["degradedAlarm"])

	g := f.find(TypeBulwarkGroup, "users", "")
	require.NotNil(t, g)
	assert.Equal(t, "P1", g["alertTier"])

	h := f.find(TypeHystrixCommand, users.Commands[0].Name, "users")
	require.NotNil(t, h)
	assert.NotContains(t, h, "alertTier")
	assert.NotContains(t, h, "rollingCountProbe")
}
