package command

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/bulwark-go/bulwark/metrics"
)

// A fallback that defers the work (returns an error matching ErrDeferred)
// answers the caller "accepted": a nil error, Degraded, DEGRADED_DEFERRED
// among Info.Events and FALLBACK_SUCCESS; a fallback that fails to defer
// answers with an error and no DEGRADED_DEFERRED.
func TestFallbackDeferredIsAcceptedNotDone(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore})
	errDown := errors.New("down")
	down := func(context.Context) (int, error) { return 0, errDown }

	v, info, err := ExecuteInfo(context.Background(), g, Func("write", down, func(context.Context, error) (int, error) {
		return 7, fmt.Errorf("stored as entry 1: %w", ErrDeferred)
	}))
	assert.NoError(t, err)
	assert.Equal(t, 7, v)
	assert.True(t, info.Events.Has(metrics.DegradedDeferred))
	assert.True(t, info.Degraded)
	assert.True(t, info.Events.Has(metrics.FallbackSuccess))
	assert.False(t, info.Events.Has(metrics.ExceptionThrown))

	errFull := errors.New("disk full")
	_, info, err = ExecuteInfo(context.Background(), g, Func("write", down, func(context.Context, error) (int, error) {
		return 0, errFull
	}))
	assert.ErrorIs(t, err, errFull)
	assert.ErrorIs(t, err, errDown)
	assert.False(t, info.Events.Has(metrics.DegradedDeferred), "an enqueue that failed is never reported accepted")
	assert.False(t, info.Degraded)
	assert.True(t, info.Events.Has(metrics.FallbackFailure))

	_, info, err = ExecuteInfo(context.Background(), g, Func("write", func(context.Context) (int, error) { return 1, nil }, nil))
	assert.NoError(t, err)
	assert.False(t, info.Events.Has(metrics.DegradedDeferred))
}
