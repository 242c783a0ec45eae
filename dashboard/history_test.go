package dashboard

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A new client gets each command's history before its first frame, so a
// reloaded page's sparkline is full at once.
func TestStreamSendsHistoryToNewClient(t *testing.T) {
	s, err := NewStream(&fakeSource{snap: sampleSnapshot()}, Config{
		Interval: 20 * time.Millisecond, MinInterval: 10 * time.Millisecond,
		History: time.Second, HistoryStep: 20 * time.Millisecond,
	})
	require.NoError(t, err)
	ts := httptest.NewServer(s)
	defer ts.Close()
	defer s.Close(context.Background())
	client := newTestClient()

	first := openStream(t, client, ts.URL)
	f, err := first.sse.frame()
	require.NoError(t, err)
	assert.Empty(t, f.ofType(TypeBulwarkHistory), "nothing recorded before the first frame")
	for range 10 {
		_, err = first.sse.frame()
		require.NoError(t, err)
	}
	first.Close()

	second := openStream(t, client, ts.URL)
	defer second.Close()
	f, err = second.sse.frame()
	require.NoError(t, err)
	hs := f.ofType(TypeBulwarkHistory)
	require.Len(t, hs, len(f.ofType(TypeHystrixCommand)), "one history event per command")
	h := f.find(TypeBulwarkHistory, "GetUser", "users")
	require.NotNil(t, h)
	points := h["points"].([]any)
	assert.GreaterOrEqual(t, len(points), 5, "about one point per 20 ms step over 10 frames")
	var prev float64
	for _, p := range points {
		t0, _ := p.([]any)[0].(json.Number).Float64()
		assert.Greater(t, t0, prev, "oldest first")
		prev = t0
	}
	hc := f.find(TypeHystrixCommand, "GetUser", "users")
	var volume float64
	for _, k := range []string{"rollingCountSuccess", "rollingCountFailure", "rollingCountTimeout", "rollingCountBadRequests",
		"rollingCountShortCircuited", "rollingCountThreadPoolRejected", "rollingCountSemaphoreRejected"} {
		n, _ := hc[k].(json.Number).Float64()
		volume += n
	}
	ms, _ := hc["propertyValue_metricsRollingStatisticalWindowInMilliseconds"].(json.Number).Float64()
	rate, _ := points[len(points)-1].([]any)[1].(json.Number).Float64()
	require.Greater(t, volume, 0.0)
	assert.InDelta(t, volume/(ms/1000), rate, 0.001, "the rate the page computes from the frame")
}

// The history keeps at most History/HistoryStep points per command, the
// newest, oldest first, and forgets a command not seen for a whole span.
func TestHistoryIsBoundedRing(t *testing.T) {
	h := newHistory(5*time.Second, time.Second)
	for i := range int64(12) {
		h.add(i*1000, "g", "c", float64(i), 0)
		h.add(i*1000+500, "g", "c", 99, 99) // less than a step later: ignored
	}
	data := string(h.frame(11_000))
	ev := strings.TrimSuffix(strings.TrimPrefix(data, "data: "), "\n\n")
	var got historyEvent
	require.NoError(t, json.Unmarshal([]byte(ev), &got))
	require.Len(t, got.Points, 5)
	for i, p := range got.Points {
		assert.Equal(t, float64(7000+1000*i), p[0])
		assert.Equal(t, float64(7+i), p[1])
	}
	assert.Nil(t, h.frame(17_000), "not seen for more than the span: forgotten")
	assert.Empty(t, h.series)
}

// KeepHistory records while no client watches, until its context ends.
func TestKeepHistoryRecordsWithoutClients(t *testing.T) {
	s, err := NewStream(&fakeSource{snap: sampleSnapshot()}, Config{History: time.Second, HistoryStep: 10 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, s.KeepHistory(ctx), context.DeadlineExceeded)
	data := string(s.hist.frame(time.Now().UnixMilli()))
	assert.Contains(t, data, `"name":"GetUser"`)
}

func TestHistoryConfigValidated(t *testing.T) {
	for _, cfg := range []Config{
		{History: -time.Second},
		{HistoryStep: -time.Second},
		{History: time.Second, HistoryStep: 2 * time.Second},
	} {
		_, err := NewStream(&fakeSource{}, cfg)
		assert.ErrorIs(t, err, ErrInvalidConfig, "%+v", cfg)
	}
}
