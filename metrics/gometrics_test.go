package metrics

import (
	"testing"
	"time"

	gometrics "github.com/rcrowley/go-metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRegisterPublishesGauges(t *testing.T) {
	r := newRing(t, true)
	var clock ManualClock
	reg := gometrics.NewRegistry()
	calls := 0
	snap := func() Snapshot { calls++; return r.Snapshot(clock.Now()) }
	require.NoError(t, Register(reg, "cmd.search", snap))

	r.Add(0, Success)
	r.Add(0, ShortCircuited)
	r.ObserveTotal(0, 3*time.Millisecond)

	gauge := func(name string) int64 {
		g, ok := reg.Get("cmd.search." + name).(gometrics.Gauge)
		require.True(t, ok, "gauge %s missing", name)
		return g.Value()
	}
	assert.EqualValues(t, 1, gauge("rolling.success"))
	assert.EqualValues(t, 1, gauge("cumulative.short_circuited"))
	assert.InEpsilon(t, float64(3*time.Millisecond), float64(gauge("total_ns.p99")), 0.02)
	assert.EqualValues(t, 1, gauge("total_ns.count"))
	assert.Equal(t, 1, calls, "one reporting cycle, one snapshot")

	r.Add(0, Success)
	assert.EqualValues(t, 2, gauge("rolling.success"), "reading a gauge again starts a fresh cycle")
	assert.Equal(t, 2, calls)

	assert.Error(t, Register(reg, "cmd.search", snap), "names already taken")
	Unregister(reg, "cmd.search")
	assert.Nil(t, reg.Get("cmd.search.rolling.success"))
	assert.ErrorIs(t, Register(nil, "x", snap), ErrInvalidConfig)
}

func TestRegisterCountsLeavesOutLatency(t *testing.T) {
	r := newRing(t, false)
	reg := gometrics.NewRegistry()
	require.NoError(t, RegisterCounts(reg, "group.db", func() Snapshot { return r.Snapshot(0) }))
	r.Add(0, Failure)
	g, ok := reg.Get("group.db.rolling.failure").(gometrics.Gauge)
	require.True(t, ok)
	assert.EqualValues(t, 1, g.Value())
	assert.Nil(t, reg.Get("group.db.total_ns.p99"), "a ring without latency publishes no percentiles")
	Unregister(reg, "group.db")
	assert.Empty(t, reg.GetAll())
}
