package command

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/wrap"
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

type namedCmd struct{}

func (namedCmd) Run(context.Context) (int, error) { return 0, nil }
func (namedCmd) Name() string                     { return "custom" }

type silentCmd struct{ NoFallback }

func (silentCmd) Run(context.Context) (int, error)             { return 0, nil }
func (silentCmd) Fallback(context.Context, error) (int, error) { return 1, nil }

func TestWrapAgreesWithExecute(t *testing.T) {
	assert.Equal(t, "custom", wrap.Name(namedCmd{}))
	assert.Equal(t, "ptrCmd", wrap.Name(&ptrCmd{}), "type name without pointer")
	assert.Equal(t, "", wrap.Name(nil))

	_, ok := wrap.Fallback[int](silentCmd{})
	assert.False(t, ok, "NoFallback hides a Fallback method")
	_, ok = wrap.Fallback[int](ptrFallback{})
	assert.False(t, ok, "a pointer-receiver Fallback is not one for a value")
	fb, ok := wrap.Fallback[int](&ptrFallback{})
	require.True(t, ok)
	v, err := fb.Fallback(context.Background(), nil)
	assert.Equal(t, 1, v)
	assert.NoError(t, err)

	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore})
	_, info, _ := ExecuteInfo(context.Background(), g, silentCmd{})
	assert.Equal(t, metrics.Success, info.Event)
	_, info, _ = ExecuteInfo(context.Background(), g, namedCmd{})
	assert.Equal(t, "custom", info.Command)
}
