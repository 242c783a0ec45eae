package command

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCumulativeLatenciesOutliveTheWindow: a command's latencies stay in
// CumulativeLatencies after they left its window.
func TestCumulativeLatenciesOutliveTheWindow(t *testing.T) {
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

	assert.Zero(t, g.Snapshot().Commands[0].Metrics.Run.Count, "get left the window")
	ls := reg.CumulativeLatencies()
	require.Len(t, ls, 2)
	assert.Equal(t, "users", ls[0].Group)
	assert.Equal(t, "get", ls[0].Command)
	assert.Equal(t, int64(2), ls[0].Run.Count())
	assert.Equal(t, 60*time.Millisecond, ls[0].Run.Sum())
	assert.Equal(t, int64(2), ls[0].Total.Count())
	assert.Equal(t, "put", ls[1].Command)
	assert.Equal(t, int64(1), ls[1].Total.Count())
}
