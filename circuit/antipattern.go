package circuit

import (
	"context"
	"log/slog"
	"time"
)

// The configurations that defeat a breaker, as the rules New warns about
// name them (the rule attribute of its Warn record). Each is valid (some test or drill may want it), so New accepts
// it and logs one Warn record per rule it breaks, with the attribute rule.
const (
	// ruleOpenTooShort: OpenDuration of 100 ms or less probes the
	// sick dependency several times a second, as if there were no breaker.
	ruleOpenTooShort = "open_too_short"
	// ruleMinRequestsOne: MinRequests 1 trips on a single failure; at a
	// low rate one failure is 100% and the breaker never settles.
	ruleMinRequestsOne = "min_requests_one"
	// ruleHalfOpenFlood: HalfOpenProbes above 10 lets a
	// half-open breaker admit about everything, so the recovering
	// dependency is knocked over again and the breaker flaps.
	ruleHalfOpenFlood = "half_open_flood"
)

// The limits of the anti-pattern rules.
const (
	antiPatternOpen   = 100 * time.Millisecond // ruleOpenTooShort: at or below
	antiPatternProbes = 10                     // ruleHalfOpenFlood: above
)

// antiPatterns returns the rules e, an effective configuration, breaks,
// each with the message that explains it.
func (e Config) antiPatterns() [][2]string {
	var found [][2]string
	if e.OpenDuration <= antiPatternOpen {
		found = append(found, [2]string{ruleOpenTooShort,
			"circuit: OpenDuration of 100 ms or less probes a sick dependency as if there were no breaker"})
	}
	if e.MinRequests == 1 {
		found = append(found, [2]string{ruleMinRequestsOne,
			"circuit: MinRequests 1 trips on one failure; the breaker never settles at a low rate"})
	}
	if e.HalfOpenProbes > antiPatternProbes {
		found = append(found, [2]string{ruleHalfOpenFlood,
			"circuit: HalfOpenProbes above 10 lets a half-open breaker through about everything; the recovering dependency is knocked over again"})
	}
	return found
}

// warnAntiPatterns logs one Warn record on e.Logger per rule e breaks.
func (e Config) warnAntiPatterns() {
	for _, f := range e.antiPatterns() {
		e.Logger.LogAttrs(context.Background(), slog.LevelWarn, f[1],
			slog.String("breaker", e.Name), slog.String("rule", f[0]),
			slog.Duration("open", e.OpenDuration), slog.Int("min_requests", e.MinRequests),
			slog.Int("half_open_probes", e.HalfOpenProbes))
	}
}
