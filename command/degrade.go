package command

import (
	"github.com/bulwark-go/bulwark/command/fallback"
	"github.com/bulwark-go/bulwark/metrics"
)

// degradations are the kinds of a degraded answer, the Degraded* events.
var degradations = metrics.SetOf(metrics.DegradedStatic, metrics.DegradedLastGood,
	metrics.DegradedFeatureOff, metrics.DegradedDeferred)

// degrade marks the call's answer as a fallback's value for cmd: the call
// is degraded, and its events hold FALLBACK_SUCCESS and the answer's kind
// (degradationOf), if any.
func (k *call) degrade(cmd any, deferred bool) {
	k.degraded = true
	k.events.Add(metrics.FallbackSuccess)
	if d := k.g.degradationOf(cmd, deferred); d != 0 {
		k.events.Add(d)
	}
}

// degradationOf returns the kind of a fallback's answer by cmd, as a
// Degraded* event: deferred when the fallback deferred the work, else what
// cmd declares (fallback.Degrader), or 0 when it declares none (or an
// event that is not a kind).
func (g *Group) degradationOf(cmd any, deferred bool) (d metrics.Event) {
	if deferred {
		return metrics.DegradedDeferred
	}
	dg, ok := cmd.(fallback.Degrader)
	if !ok {
		return 0
	}
	defer g.recoverHook("Degradation")
	if k := dg.Degradation(); degradations.Has(k) {
		d = k
	}
	return d
}
