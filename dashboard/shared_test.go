package dashboard

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A group breaker whose state is shared (fleet over Redis) carries its
// shared-state status on the native group event; one that judges alone
// carries "".
func TestStreamNativeSharedStatus(t *testing.T) {
	snap := sampleSnapshot()
	snap.Groups[0].Breaker.Shared = "shared state: degraded (sync: i/o timeout)"
	_, ts := newTestStream(t, &fakeSource{snap: snap}, Config{})
	c := openStream(t, newTestClient(), ts.URL)
	defer c.Close()
	f, err := c.sse.frame()
	require.NoError(t, err)
	g := f.find(TypeBulwarkGroup, snap.Groups[0].Name, "")
	require.NotNil(t, g)
	assert.Equal(t, "shared state: degraded (sync: i/o timeout)", g["shared"])
	cmd := f.find(TypeBulwarkCommand, "GetUser", "users")
	require.NotNil(t, cmd)
	assert.Equal(t, "", cmd["shared"])
}
