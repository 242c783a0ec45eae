package command

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLatenciesOutliveTheWindow: a command's latencies stay in its
// snapshot's Latencies after they left its window.
func TestLatenciesOutliveTheWindow(t *testing.T) {
	reg, clock := newTestRegistry(t)
	g, err := reg.NewGroup("users", GroupConfig{Strategy: Semaphore, Timeout: NoTimeout})
	require.NoError(t, err)
	slow := op[int]{name: "get", run: func(context.Context) (int, error) {
		clock.Advance(30 * time.Millisecond)
		return 1, nil
	}}
	for range 2 {
		_, err := Execute(context.Background(), g, slow)
		require.NoError(t, err)
		clock.Advance(time.Minute)
	}
	_, err = Execute(context.Background(), g, op[int]{name: "put", run: succeed(1)})
	require.NoError(t, err)

	cs := g.Snapshot().Commands
	require.Len(t, cs, 2)
	assert.Zero(t, cs[0].Metrics.Run.Count, "get left the window")
	run, total := cs[0].Latencies()
	assert.Equal(t, int64(2), run.Count())
	assert.Equal(t, 60*time.Millisecond, run.Sum())
	assert.Equal(t, int64(2), total.Count())
	n, sum, ok := cs[0].TotalLatencies()
	assert.True(t, ok)
	assert.Equal(t, total.Count(), n)
	assert.Equal(t, total.Sum(), sum)
	assert.Equal(t, "put", cs[1].Name)
	_, total = cs[1].Latencies()
	assert.Equal(t, int64(1), total.Count())
	run, total = (&CommandSnapshot{}).Latencies()
	assert.Nil(t, run, "a snapshot Registry.Snapshot did not build has none")
	assert.Nil(t, total)
	_, _, ok = (&CommandSnapshot{}).TotalLatencies()
	assert.False(t, ok)
}
