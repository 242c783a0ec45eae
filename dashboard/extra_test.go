package dashboard

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Config.Extra's events follow bulwark's own in each frame, before the
// ping (which frame() checks).
func TestStreamExtraEvents(t *testing.T) {
	type queueEvent struct {
		Type    string `json:"type"`
		Name    string `json:"name"`
		Backlog int    `json:"backlog"`
	}
	extra := func() []any { return []any{queueEvent{Type: "BulwarkQueue", Name: "orders", Backlog: 7}} }
	_, ts := newTestStream(t, &fakeSource{snap: sampleSnapshot()}, Config{Extra: extra})
	c := openStream(t, newTestClient(), ts.URL)
	defer c.Close()
	f, err := c.sse.frame()
	require.NoError(t, err)
	require.NotEmpty(t, f.events)
	last := f.events[len(f.events)-1]
	assert.Equal(t, "BulwarkQueue", last["type"])
	assert.Equal(t, "orders", last["name"])
	assert.EqualValues(t, 7, num(last["backlog"]))
	assert.Len(t, f.ofType(TypeBulwarkGroup), 2, "bulwark's own events are all there")
}
