package command

import (
	"github.com/bulwark-go/bulwark/command/fallback"
	"github.com/bulwark-go/bulwark/metrics"
)

// degradationOf returns the kind of a fallback's answer by cmd, as a
// Degraded* event: deferred when the fallback deferred the work, else what
// cmd declares (fallback.Degrader), or 0 when it declares none.
func (g *Group) degradationOf(cmd any, deferred bool) (d metrics.Event) {
	if deferred {
		return metrics.DegradedDeferred
	}
	dg, ok := cmd.(fallback.Degrader)
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
