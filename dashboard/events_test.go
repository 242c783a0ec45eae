package dashboard

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/eventdoc"
	"github.com/bulwark-go/bulwark/metrics"
)

// Each stream key that docs/events.md writes beside an event carries that
// event's count, and the count of every other event written beside the
// same key: a snapshot whose counts are distinct powers of two shows which
// events a key sums.
func TestEventsTableHystrixKeys(t *testing.T) {
	rows, err := eventdoc.Read("../docs/events.md")
	require.NoError(t, err)
	require.Len(t, rows, int(metrics.NumEvents))
	snap := sampleSnapshot()
	users := &snap.Groups[1]
	get := &users.Commands[0]
	for e := range metrics.NumEvents {
		get.Metrics.Counts[e] = 1 << e
	}
	want := map[string]map[string]float64{TypeHystrixCommand: {}, TypeBulwarkCommand: {}}
	for e, r := range rows {
		if r.HystrixKey != "" {
			want[TypeHystrixCommand][r.HystrixKey] += float64(int64(1) << e)
		}
		if r.NativeKey != "" {
			want[TypeBulwarkCommand][r.NativeKey] += float64(int64(1) << e)
		}
	}
	var enc encoder
	frame, err := enc.encode(snap, 0)
	require.NoError(t, err)
	got := map[string]map[string]any{}
	for _, l := range bytes.Split(frame, []byte("\n")) {
		data, ok := bytes.CutPrefix(l, dataPrefix)
		if !ok {
			continue
		}
		var ev map[string]any
		require.NoError(t, json.Unmarshal(data, &ev))
		if ev["name"] == get.Name && ev["group"] == users.Name {
			got[ev["type"].(string)] = ev
		}
	}
	for typ, keys := range want {
		require.NotNil(t, got[typ], typ)
		for key, sum := range keys {
			assert.Equal(t, sum, got[typ][key], "%s %s", typ, key)
		}
	}
	assert.Len(t, want[TypeHystrixCommand], 13, "the Hystrix keys of events")
}
