package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadOnlyToggle: "readOnly" in a rules document switches a group's
// read-only mode, and dropping it brings the group back to its baseline.
func TestReadOnlyToggle(t *testing.T) {
	reg := newRegistry(t)
	m := newManager(t, reg)
	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"orders": {"readOnly": true}}}`)))
	g, ok := reg.Group("orders")
	require.True(t, ok)
	assert.True(t, g.ReadOnly())
	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"orders": {}}}`)))
	assert.False(t, g.ReadOnly())
	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"orders": {"preset": "dependency", "readOnly": true}}}`)))
	assert.True(t, g.ReadOnly())
	assert.Equal(t, 500*time.Millisecond, g.Config().Breaker.Window.Length, "the recommended preset by name")
}
