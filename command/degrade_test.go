package command

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/metrics"
)

type staticOp struct {
	op[int]
	Static[int]
}

type featureOffOp struct {
	op[[]string]
	FeatureOff[[]string]
}

type lastGoodOp struct {
	op[int]
	*LastGood[int]
}

// kindOp declares the kind k; its fallback serves 7.
type kindOp struct {
	op[int]
	k Degradation
}

func (kindOp) Fallback(context.Context, error) (int, error) { return 7, nil }
func (o kindOp) Degradation() Degradation                   { return o.k }

// TestDegradationKinds: each helper's answer carries its kind in Info and
// is counted as its event beside FALLBACK_SUCCESS; a fallback that declares
// none, or an unknown kind, is DegradedOther and counted by no kind event;
// an answer that is not degraded is DegradedNone.
func TestDegradationKinds(t *testing.T) {
	g, clock := newTestGroup(t, GroupConfig{Strategy: Semaphore})
	ctx := context.Background()
	boom := fail[int](errBoom)

	_, info, err := ExecuteInfo(ctx, g, op[int]{"ok", succeed(1)})
	require.NoError(t, err)
	assert.Equal(t, DegradedNone, info.Degradation)

	_, info, err = ExecuteInfo(ctx, g, staticOp{op[int]{"static", boom}, Static[int]{Value: 3}})
	require.NoError(t, err)
	assert.Equal(t, DegradedStatic, info.Degradation)
	assert.True(t, info.Events.Has(metrics.DegradedStatic))

	list, info, err := ExecuteInfo(ctx, g, featureOffOp{op: op[[]string]{"recs", fail[[]string](errBoom)}})
	require.NoError(t, err)
	assert.Nil(t, list)
	assert.Equal(t, DegradedFeatureOff, info.Degradation)

	lg, err := NewLastGood[int](time.Minute, clock)
	require.NoError(t, err)
	lg.Store(5)
	v, info, err := ExecuteInfo(ctx, g, lastGoodOp{op[int]{"price", boom}, lg})
	require.NoError(t, err)
	assert.Equal(t, 5, v)
	assert.Equal(t, DegradedLastGood, info.Degradation)

	_, info, err = ExecuteInfo(ctx, g, opFB[int]{op[int]{"custom", boom}, func(context.Context, error) (int, error) { return 1, nil }})
	require.NoError(t, err)
	assert.Equal(t, DegradedOther, info.Degradation)

	_, info, err = ExecuteInfo(ctx, g, kindOp{op[int]{"bogus", boom}, Degradation(200)})
	require.NoError(t, err)
	assert.Equal(t, DegradedOther, info.Degradation, "an unknown kind counts as other")
	_, info, err = ExecuteInfo(ctx, g, kindOp{op[int]{"none", boom}, DegradedNone})
	require.NoError(t, err)
	assert.Equal(t, DegradedOther, info.Degradation, "a degraded answer is never DegradedNone")

	// A fallback that fails is no degraded answer, whatever its kind.
	_, info, err = ExecuteInfo(ctx, g, lastGoodOp{op[int]{"empty", boom}, mustLastGood(t, clock)})
	require.ErrorIs(t, err, ErrNoLastGood)
	assert.Equal(t, DegradedNone, info.Degradation)

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

func mustLastGood(t *testing.T, clock metrics.Clock) *LastGood[int] {
	t.Helper()
	lg, err := NewLastGood[int](time.Minute, clock)
	require.NoError(t, err)
	return lg
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func TestDegradationStringAndEvent(t *testing.T) {
	for d, want := range map[Degradation]string{DegradedNone: "none", DegradedOther: "other", DegradedStatic: "static",
		DegradedLastGood: "last_good", DegradedFeatureOff: "feature_off", DegradedDeferred: "deferred", 9: "Degradation(9)"} {
		assert.Equal(t, want, d.String())
	}
	for _, d := range []Degradation{DegradedStatic, DegradedLastGood, DegradedFeatureOff, DegradedDeferred} {
		e, ok := d.Event()
		require.True(t, ok)
		assert.Equal(t, "degraded_"+d.String(), e.Label(), "the event's label names the kind")
	}
	for _, d := range []Degradation{DegradedNone, DegradedOther, 9} {
		_, ok := d.Event()
		assert.False(t, ok, d.String())
	}
}
