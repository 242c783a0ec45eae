package command

import (
	"context"
	"fmt"

	"github.com/bulwark-go/bulwark/metrics"
)

// Degradation is the kind of a degraded answer (Info.Degradation), so that
// "degraded" can be told apart: a default served in place of data is not
// a feature switched off, and neither is a write deferred for later. Each
// kind but DegradedOther is also counted, as an event beside
// FALLBACK_SUCCESS (DEGRADED_STATIC ... DEGRADED_DEFERRED), on every
// surface the events reach: the metrics, the stream, Prometheus, the page.
type Degradation uint8

// The kinds of degradation.
const (
	// DegradedNone: the answer is not degraded (Info.Degraded is false).
	DegradedNone Degradation = iota
	// DegradedOther: a fallback that declares no kind (no Degrader).
	DegradedOther
	// DegradedStatic: a static default (Static).
	DegradedStatic
	// DegradedLastGood: the last good value, possibly stale (LastGood).
	DegradedLastGood
	// DegradedFeatureOff: the feature is off; the answer is empty
	// (FeatureOff).
	DegradedFeatureOff
	// DegradedDeferred: the work is accepted for later (the fallback
	// returned ErrDeferred); Info.Deferred is true too.
	DegradedDeferred
)

var degradationNames = [...]string{"none", "other", "static", "last_good", "feature_off", "deferred"}

// String returns the kind in lower case: "none", "other", "static",
// "last_good", "feature_off" or "deferred".
func (d Degradation) String() string {
	if int(d) < len(degradationNames) {
		return degradationNames[d]
	}
	return fmt.Sprintf("Degradation(%d)", uint8(d))
}

// Event returns the event that counts the kind (metrics.DegradedStatic ...
// metrics.DegradedDeferred), and false for DegradedNone, DegradedOther and
// an unknown kind, which have none.
func (d Degradation) Event() (metrics.Event, bool) {
	switch d {
	case DegradedStatic:
		return metrics.DegradedStatic, true
	case DegradedLastGood:
		return metrics.DegradedLastGood, true
	case DegradedFeatureOff:
		return metrics.DegradedFeatureOff, true
	case DegradedDeferred:
		return metrics.DegradedDeferred, true
	}
	return 0, false
}

// Degrader is implemented by a command whose Fallback serves one kind of
// degraded answer; Static, LastGood and FeatureOff implement it, so a
// command that embeds one declares its kind. A fallback that returns
// ErrDeferred is DegradedDeferred whatever it declares. A command without
// it is DegradedOther; a kind it returns that is not one of the constants
// above (or a panic in it, which is logged) counts as DegradedOther too.
type Degrader interface {
	Degradation() Degradation
}

// Degradation returns DegradedStatic.
func (Static[T]) Degradation() Degradation { return DegradedStatic }

// Degradation returns DegradedLastGood.
func (*LastGood[T]) Degradation() Degradation { return DegradedLastGood }

// FeatureOff is a fallback that turns the feature off: it serves T's zero
// value (an empty list, no recommendations) marked DegradedFeatureOff, so
// that callers and dashboards read it as "feature off", not as "no data".
// Embed it in a command: its Fallback method is promoted.
type FeatureOff[T any] struct{}

// Fallback returns T's zero value.
func (FeatureOff[T]) Fallback(context.Context, error) (T, error) {
	var zero T
	return zero, nil
}

// Degradation returns DegradedFeatureOff.
func (FeatureOff[T]) Degradation() Degradation { return DegradedFeatureOff }

// degradationOf returns the kind of a fallback's answer by cmd: deferred
// when the fallback deferred the work, else what cmd declares (Degrader).
func (g *Group) degradationOf(cmd any, deferred bool) (d Degradation) {
	if deferred {
		return DegradedDeferred
	}
	dg, ok := cmd.(Degrader)
	if !ok {
		return DegradedOther
	}
	d = DegradedOther
	defer g.recoverHook("Degradation")
	if k := dg.Degradation(); k > DegradedOther && int(k) < len(degradationNames) {
		d = k
	}
	return d
}
