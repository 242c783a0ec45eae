package command

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/bulwark-go/bulwark/metrics"
)

func TestFunc(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore})
	errDown := errors.New("down")
	ok := func(context.Context) (int, error) { return 1, nil }
	down := func(context.Context) (int, error) { return 0, errDown }

	v, info, err := ExecuteInfo(context.Background(), g, Func("get", ok, nil))
	assert.Equal(t, 1, v)
	assert.NoError(t, err)
	assert.Equal(t, "get", info.Command)

	_, info, err = ExecuteInfo(context.Background(), g, Func("get", down, nil))
	assert.ErrorIs(t, err, errDown)
	assert.ErrorIs(t, err, ErrFallbackMissing, "a nil fallback declines")
	assert.True(t, info.Events.Has(metrics.FallbackMissing))

	v, info, err = ExecuteInfo(context.Background(), g, Func("put", down, func(_ context.Context, err error) (int, error) {
		assert.ErrorIs(t, err, errDown, "the fallback gets the call's error")
		return -1, nil
	}))
	assert.NoError(t, err)
	assert.Equal(t, -1, v)
	assert.True(t, info.Degraded)

	names := []string{}
	for _, c := range g.Snapshot().Commands {
		names = append(names, c.Name)
	}
	assert.Equal(t, []string{"get", "put"}, names, "one command per name")
}
