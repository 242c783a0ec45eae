package rules

import (
	"context"
	"testing"
	"time"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// placeOrder is a write: read-only mode refuses it.
type placeOrder struct{}

func (placeOrder) Run(context.Context) (int, error) { return 1, nil }
func (placeOrder) Write() bool                      { return true }

// TestReadOnlyToggle: "readOnly" in a rules document switches a group's
// read-only mode, and dropping it brings the group back to its baseline.
func TestReadOnlyToggle(t *testing.T) {
	reg := newRegistry(t)
	m := newManager(t, reg)
	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"orders": {"readOnly": true}}}`)))
	g, ok := reg.Group("orders")
	require.True(t, ok)
	write := func() metrics.Event {
		_, info, _ := command.ExecuteInfo(context.Background(), g, placeOrder{})
		return info.Event
	}
	assert.Equal(t, metrics.ReadOnly, write())
	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"orders": {}}}`)))
	assert.Equal(t, metrics.Success, write())
	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"orders": {"preset": "dependency", "readOnly": true}}}`)))
	assert.Equal(t, metrics.ReadOnly, write())
	assert.Equal(t, 500*time.Millisecond, g.Config().Breaker.Window.Length, "the recommended preset by name")
}
