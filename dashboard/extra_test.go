package dashboard

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

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

// The aggregate's stream carries Config.Extra too: Stream.Extra was
// accepted and silently dropped.
func TestAggregateStreamExtraEvents(t *testing.T) {
	in := startInstance(t)
	extra := func() []any { return []any{map[string]any{"type": "BulwarkQueue", "name": "orders"}} }
	agg, err := NewAggregate(AggregateConfig{
		Instances: []string{in.url()},
		Stream:    Config{Interval: 50 * time.Millisecond, MinInterval: 10 * time.Millisecond, Logger: quietLog, Extra: extra},
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, agg.Close(context.Background())) }()
	ts := httptest.NewServer(agg)
	defer ts.Close()
	c := openStream(t, newTestClient(), ts.URL+StreamPath)
	defer c.Close()
	f, err := c.sse.frame()
	require.NoError(t, err)
	require.NotEmpty(t, f.events)
	last := f.events[len(f.events)-1]
	assert.Equal(t, "BulwarkQueue", last["type"])
	assert.Equal(t, "orders", last["name"])
}
