package durable_test

import (
	"context"
	"encoding/json"
	"testing"

	gometrics "github.com/rcrowley/go-metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/durable"
)

// The backlog, the oldest entry's age and the replayed and dead-lettered
// counts reach go-metrics and the dashboard event.
func TestReplayerObservability(t *testing.T) {
	g, _ := newGroup(t)
	q := openStore(t)
	rcv := newReceiver()
	enqueueN(t, q, 3)
	r := newReplayer(t, durable.ReplayerConfig{Queue: q, Group: g, Apply: rcv.apply})
	reg := gometrics.NewRegistry()
	require.NoError(t, r.RegisterMetrics(reg))
	assert.Error(t, r.RegisterMetrics(reg), "names already taken")
	gauge := func(name string) int64 {
		m, ok := reg.Get("queue.orders." + name).(gometrics.Gauge)
		require.True(t, ok, name)
		return m.Value()
	}

	g.Breaker().SetMode(circuit.ForcedOpen)
	_, err := r.Drain(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(3), gauge("backlog"))
	assert.GreaterOrEqual(t, gauge("oldest_age_ms"), int64(0))
	ev := r.StreamEvent()
	assert.Equal(t, "BulwarkQueue", ev.Type)
	assert.Equal(t, "orders", ev.Name)
	assert.Equal(t, 3, ev.Backlog)

	g.Breaker().SetMode(circuit.Normal)
	_, err = r.Drain(context.Background())
	require.NoError(t, err)
	assert.Zero(t, gauge("backlog"))
	assert.Zero(t, gauge("oldest_age_ms"))
	assert.Equal(t, int64(3), gauge("replayed"))
	assert.Zero(t, gauge("dead_lettered"))
	assert.Zero(t, gauge("dead_letters"))
	assert.Zero(t, gauge("outages"))
	assert.Zero(t, gauge("resets"))
	raw, err := json.Marshal(r.StreamEvent())
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"BulwarkQueue","name":"orders","backlog":0,"oldestAgeMs":0,"replayed":3,"deadLettered":0,"deadLetters":0,"outages":0,"resets":0}`, string(raw))
}
