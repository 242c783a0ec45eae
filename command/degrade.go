package command

import (
	"context"

	"github.com/bulwark-go/bulwark/metrics"
)

// Degrader is implemented by a command whose Fallback serves one kind of
// degraded answer, so that "degraded" can be told apart: a default served
// in place of data is not a feature switched off, and neither is a write
// deferred for later. Degradation returns the event that counts the kind:
// metrics.DegradedStatic, DegradedLastGood, DegradedFeatureOff or
// DegradedDeferred. Static,
// LastGood and FeatureOff implement it, so a command that embeds one
// declares its kind. The kind is counted beside FALLBACK_SUCCESS, in the
// metrics and in Info.Events, on every surface the events reach (the
// stream, Prometheus, the page). A fallback that returns ErrDeferred is
// metrics.DegradedDeferred whatever it declares. A command without
// Degrader, or whose Degradation returns another event (or panics, which
// is logged), declares no kind: its degraded answers count no kind event.
type Degrader interface {
	Degradation() metrics.Event
}

// Degradation returns metrics.DegradedStatic.
func (Static[T]) Degradation() metrics.Event { return metrics.DegradedStatic }

// Degradation returns metrics.DegradedLastGood.
func (*LastGood[T]) Degradation() metrics.Event { return metrics.DegradedLastGood }

// FeatureOff is a fallback that turns the feature off: it serves T's zero
// value (an empty list, no recommendations) marked
// metrics.DegradedFeatureOff, so
// that callers and dashboards read it as "feature off", not as "no data".
// Embed it in a command: its Fallback method is promoted.
type FeatureOff[T any] struct{}

// Fallback returns T's zero value.
func (FeatureOff[T]) Fallback(context.Context, error) (T, error) {
	var zero T
	return zero, nil
}

// Degradation returns metrics.DegradedFeatureOff.
func (FeatureOff[T]) Degradation() metrics.Event { return metrics.DegradedFeatureOff }

// degradationOf returns the kind of a fallback's answer by cmd, as a
// Degraded* event: deferred when the fallback deferred the work, else what
// cmd declares (Degrader), or 0 when it declares none.
func (g *Group) degradationOf(cmd any, deferred bool) (d metrics.Event) {
	if deferred {
		return metrics.DegradedDeferred
	}
	dg, ok := cmd.(Degrader)
	if !ok {
		return 0
	}
	defer g.recoverHook("Degradation")
	switch k := dg.Degradation(); k {
	case metrics.DegradedStatic, metrics.DegradedLastGood, metrics.DegradedFeatureOff, metrics.DegradedDeferred:
		d = k
	}
	return d
}
