package command

import (
	"testing"
	"time"

	gometrics "github.com/rcrowley/go-metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/metrics"
)

func newWindow(t *testing.T, c metrics.Contents) *metrics.Rolling {
	t.Helper()
	r, err := metrics.NewRolling(metrics.Window{Length: time.Second, Buckets: 10}, c)
	require.NoError(t, err)
	return r
}

func TestRegisterWindowPublishesGauges(t *testing.T) {
	r := newWindow(t, metrics.CountsAndLatencies)
	reg := gometrics.NewRegistry()
	calls := 0
	snap := func() metrics.Snapshot { calls++; return r.Snapshot(0) }
	require.NoError(t, registerWindow(reg, "cmd.search", true, snap))

	r.Record(0, metrics.SetOf(metrics.Success), metrics.NoLatency, 3*time.Millisecond)
	r.Record(0, metrics.SetOf(metrics.ShortCircuited), metrics.NoLatency, 3*time.Millisecond)

	gauge := func(name string) int64 {
		g, ok := reg.Get("cmd.search." + name).(gometrics.Gauge)
		require.True(t, ok, "gauge %s missing", name)
		return g.Value()
	}
	assert.EqualValues(t, 1, gauge("rolling.success"))
	assert.EqualValues(t, 1, gauge("cumulative.short_circuited"))
	assert.InEpsilon(t, float64(3*time.Millisecond), float64(gauge("total_ns.p99")), 0.02)
	assert.EqualValues(t, 2, gauge("total_ns.count"))
	assert.Equal(t, 1, calls, "one reporting cycle, one snapshot")

	r.Record(0, metrics.SetOf(metrics.Success), metrics.NoLatency, time.Millisecond)
	assert.EqualValues(t, 2, gauge("rolling.success"), "reading a gauge again starts a fresh cycle")
	assert.Equal(t, 2, calls)

	assert.Error(t, registerWindow(reg, "cmd.search", true, snap), "names already taken")
	unregisterWindow(reg, "cmd.search")
	assert.Nil(t, reg.Get("cmd.search.rolling.success"))
}

func TestRegisterWindowCountsOnlyLeavesOutLatency(t *testing.T) {
	r := newWindow(t, metrics.CountsOnly)
	reg := gometrics.NewRegistry()
	require.NoError(t, registerWindow(reg, "group.db", false, func() metrics.Snapshot { return r.Snapshot(0) }))
	r.Record(0, metrics.SetOf(metrics.Failure), metrics.NoLatency, metrics.NoLatency)
	g, ok := reg.Get("group.db.rolling.failure").(gometrics.Gauge)
	require.True(t, ok)
	assert.EqualValues(t, 1, g.Value())
	assert.Nil(t, reg.Get("group.db.total_ns.p99"), "a ring without latency publishes no percentiles")
	unregisterWindow(reg, "group.db")
	assert.Empty(t, reg.GetAll())
}
