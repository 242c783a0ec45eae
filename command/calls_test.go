package command

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/metrics"
)

// TestCallsCountsPrimaryOutcomesOnly: a call that failed and was served by
// its fallback has two events (FAILURE and FALLBACK_SUCCESS) but is one call.
func TestCallsCountsPrimaryOutcomesOnly(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{})
	ok := op[int]{name: "get", run: succeed(1)}
	bad := opFB[int]{op: op[int]{name: "get", run: fail[int](errors.New("down"))},
		fb: func(context.Context, error) (int, error) { return 0, nil }}
	_, err := Execute(context.Background(), g, ok)
	require.NoError(t, err)
	_, err = Execute(context.Background(), g, bad)
	require.NoError(t, err)

	s := g.Snapshot().Commands[0].Metrics
	assert.Equal(t, int64(2), s.Cumulative.Calls())
	assert.Equal(t, int64(2), s.Counts.Calls())
	assert.Equal(t, int64(1), s.Cumulative[metrics.FallbackSuccess])
}
