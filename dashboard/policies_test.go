package dashboard

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
)

// The native events carry the breaker's operating policies: warm-up,
// half-open failures so far, the health check's line, and the confidence
// rule with the bounds it judges.
func TestStreamNativePolicies(t *testing.T) {
	snap := sampleSnapshot()
	users := &snap.Groups[1]
	users.Breaker.WarmUpLeft = 42 * time.Second
	get := &users.Commands[0].Breaker
	get.WarmUpLeft = 42 * time.Second
	get.HealthCheck = "5 checks, 4 failed; last failed: connection refused"
	get.Config.Confidence = 0.95
	get.Health.ErrorRatio, get.Health.ErrorBound, get.Health.SlowBound = 0.5, 0.29934, 0.01
	list := &users.Commands[1].Breaker
	list.State = circuit.HalfOpen
	list.ProbeFailures = 1

	_, ts := newTestStream(t, &fakeSource{snap: snap}, Config{})
	c := openStream(t, newTestClient(), ts.URL)
	defer c.Close()
	f, err := c.sse.frame()
	require.NoError(t, err)

	ev := f.find(TypeBulwarkCommand, "GetUser", "users")
	require.NotNil(t, ev)
	assert.Equal(t, true, ev["warmingUp"])
	assert.EqualValues(t, 42000, num(ev["warmUpLeftMs"]))
	assert.Equal(t, "5 checks, 4 failed; last failed: connection refused", ev["healthCheck"])
	assert.Equal(t, json.Number("0.95"), ev["confidence"])
	assert.Equal(t, json.Number("0.2993"), ev["errorBound"], "rounded like every ratio")
	assert.Equal(t, json.Number("0.01"), ev["slowBound"])

	ev = f.find(TypeBulwarkCommand, "ListUsers", "users")
	require.NotNil(t, ev)
	assert.Equal(t, false, ev["warmingUp"])
	assert.EqualValues(t, 1, num(ev["probeFailures"]))
	assert.Equal(t, "", ev["healthCheck"], "no checker")
	assert.Equal(t, json.Number("0"), ev["confidence"], "the rule off")

	g := f.find(TypeBulwarkGroup, "users", "")
	require.NotNil(t, g)
	assert.Equal(t, true, g["warmingUp"])
}
