package command

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command/fallback"
	"github.com/bulwark-go/bulwark/metrics"
)

type staticOp struct {
	op[int]
	fallback.Static[int]
}

type featureOffOp struct {
	op[[]string]
	fallback.FeatureOff[[]string]
}

type lastGoodOp struct {
	op[int]
	*fallback.LastGood[int]
}

// kindOp declares the kind k; its fallback serves 7.
type kindOp struct {
	op[int]
	k metrics.Event
}

func (kindOp) Fallback(context.Context, error) (int, error) { return 7, nil }
func (o kindOp) Degradation() metrics.Event                 { return o.k }

// degradedKind returns the Degraded* event in in.Events, or 0 when there is none.
func degradedKind(t *testing.T, in Info) metrics.Event {
	t.Helper()
	var kind metrics.Event
	for _, k := range []metrics.Event{metrics.DegradedStatic, metrics.DegradedLastGood, metrics.DegradedFeatureOff, metrics.DegradedDeferred} {
		if in.Events.Has(k) {
			require.Zero(t, kind, "two kinds in %v", in.Events)
			kind = k
		}
	}
	return kind
}

// TestDegradationKinds: each helper's answer carries its kind in
// Info.Events and is counted as its event beside FALLBACK_SUCCESS; a
// fallback that declares none, or an event that is no kind, is degraded
// with no kind event; an answer that is not degraded has none either.
func TestDegradationKinds(t *testing.T) {
	g, clock := newTestGroup(t, GroupConfig{Strategy: Semaphore})
	ctx := context.Background()
	boom := fail[int](errBoom)

	_, info, err := ExecuteInfo(ctx, g, op[int]{"ok", succeed(1)})
	require.NoError(t, err)
	assert.Zero(t, degradedKind(t, info))

	_, info, err = ExecuteInfo(ctx, g, staticOp{op[int]{"static", boom}, fallback.Static[int]{Value: 3}})
	require.NoError(t, err)
	assert.Equal(t, metrics.DegradedStatic, degradedKind(t, info))

	list, info, err := ExecuteInfo(ctx, g, featureOffOp{op: op[[]string]{"recs", fail[[]string](errBoom)}})
	require.NoError(t, err)
	assert.Nil(t, list)
	assert.Equal(t, metrics.DegradedFeatureOff, degradedKind(t, info))

	lg, err := fallback.NewLastGood[int](time.Minute, clock)
	require.NoError(t, err)
	lg.Store(5)
	v, info, err := ExecuteInfo(ctx, g, lastGoodOp{op[int]{"price", boom}, lg})
	require.NoError(t, err)
	assert.Equal(t, 5, v)
	assert.Equal(t, metrics.DegradedLastGood, degradedKind(t, info))

	_, info, err = ExecuteInfo(ctx, g, opFB[int]{op[int]{"custom", boom}, func(context.Context, error) (int, error) { return 1, nil }})
	require.NoError(t, err)
	assert.True(t, info.Degraded)
	assert.Zero(t, degradedKind(t, info))

	_, info, err = ExecuteInfo(ctx, g, kindOp{op[int]{"bogus", boom}, metrics.Timeout})
	require.NoError(t, err)
	assert.True(t, info.Degraded)
	assert.Zero(t, degradedKind(t, info), "an event that is no kind declares none")
	assert.False(t, info.Events.Has(metrics.Timeout), "and is not recorded")
	_, info, err = ExecuteInfo(ctx, g, kindOp{op[int]{"none", boom}, metrics.NumEvents + 3})
	require.NoError(t, err)
	assert.True(t, info.Degraded)
	assert.Zero(t, degradedKind(t, info), "an event out of range declares none")

	// A fallback that fails is no degraded answer, whatever its kind.
	_, info, err = ExecuteInfo(ctx, g, lastGoodOp{op[int]{"empty", boom}, mustLastGood(t, clock)})
	require.ErrorIs(t, err, fallback.ErrNoLastGood)
	assert.False(t, info.Degraded)
	assert.Zero(t, degradedKind(t, info))

	want := map[string]metrics.Event{"static": metrics.DegradedStatic, "recs": metrics.DegradedFeatureOff,
		"price": metrics.DegradedLastGood}
	kinds := []metrics.Event{metrics.DegradedStatic, metrics.DegradedLastGood, metrics.DegradedFeatureOff, metrics.DegradedDeferred}
	for name, e := range want {
		c := counts(t, g, name)
		for _, k := range kinds {
			assert.EqualValues(t, b2i(k == e), c[k], "%s: %v", name, k)
		}
		assert.EqualValues(t, 1, c[metrics.FallbackSuccess], name)
	}
	for _, name := range []string{"custom", "bogus", "none"} {
		c := counts(t, g, name)
		for _, k := range kinds {
			assert.Zero(t, c[k], "%s: %v", name, k)
		}
	}
}

func mustLastGood(t *testing.T, clock metrics.Clock) *fallback.LastGood[int] {
	t.Helper()
	lg, err := fallback.NewLastGood[int](time.Minute, clock)
	require.NoError(t, err)
	return lg
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
