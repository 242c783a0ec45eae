package command

import (
	"fmt"
	"strings"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/metrics"
)

// The preset names Preset knows, as a rules file spells them.
const (
	presetL1           = "l1"            // experience: recommendations, reviews
	presetL2           = "l2"            // decision support: profiles, tags
	presetL3           = "l3"            // near-core: risk checks, pricing
	presetStrong       = "strong"        // a dependency the request cannot do without
	presetNeverDegrade = "never-degrade" // writes that must fail loudly: payments
	presetDependency   = "dependency"    // recommended: an HTTP or gRPC dependency
	presetGovkit       = "govkit"        // the source's "govkit" defaults
)

// presetNames lists the presets in the order of docs/live-rules.md's table.
var presetNames = []string{presetL1, presetL2, presetL3, presetStrong, presetNeverDegrade, presetDependency, presetGovkit}

// Preset returns the GroupConfig of the named preset, the same names a
// rules file takes:
//
//   - "l1": an experience dependency (recommendations, reviews);
//   - "l2": decision support (profiles, tags);
//   - "l3": near-core (risk checks, pricing);
//   - "strong": a dependency the request cannot do without;
//   - "never-degrade": writes that must fail loudly (payments): no fallback;
//   - "dependency": the recommended configuration for a call to an HTTP or
//     gRPC dependency;
//   - "govkit": the source's "govkit" defaults.
//
// A preset is a plain GroupConfig: change any field before passing it to
// NewGroup or Reconfigure. The error of an unknown name wraps
// ErrInvalidConfig and lists the known ones.
func Preset(name string) (GroupConfig, error) {
	switch name {
	case presetL1:
		return tier(80*time.Millisecond, 20, 0.5, 100*time.Millisecond, 0.6, 5*time.Second, 3), nil
	case presetL2:
		return tier(120*time.Millisecond, 20, 0.4, 150*time.Millisecond, 0.5, 10*time.Second, 2), nil
	case presetL3:
		return tier(150*time.Millisecond, 10, 0.2, 200*time.Millisecond, 0.3, 15*time.Second, 1), nil
	case presetStrong:
		return strongPreset(), nil
	case presetNeverDegrade:
		return neverDegradePreset(), nil
	case presetDependency:
		return dependencyPreset(), nil
	case presetGovkit:
		return govkitPreset(), nil
	}
	return GroupConfig{}, fmt.Errorf("%w: unknown preset %q (known: %s)", ErrInvalidConfig, name, strings.Join(presetNames, ", "))
}

// tier is a weak-dependency preset: both breakers (the group's and each
// command's) judge by the same thresholds over a 10 s window.
func tier(timeout time.Duration, minRequests int, failureRatio float64, slow time.Duration, slowRatio float64,
	open time.Duration, probes int) GroupConfig {
	b := circuit.Config{
		Window:           metrics.Window{Length: 10 * time.Second, Buckets: 10},
		MinRequests:      minRequests,
		FailureRatio:     failureRatio,
		SlowCallDuration: slow,
		SlowCallRatio:    slowRatio,
		OpenDuration:     open,
		HalfOpenProbes:   probes,
	}
	return GroupConfig{Timeout: timeout, Breaker: b, CommandBreaker: b}
}

// strongPreset is for a dependency the request cannot be served without
// (the user store behind a login): a fallback has little to offer, so the
// breaker trips only on a clear outage (80% failing over at least 50
// calls), probes again soon (2 s) with several probes, and ramps traffic
// back up over 10 s; the timeout is generous (1 s).
func strongPreset() GroupConfig {
	b := circuit.Config{
		Window:         metrics.Window{Length: 10 * time.Second, Buckets: 10},
		MinRequests:    50,
		FailureRatio:   0.8,
		OpenDuration:   2 * time.Second,
		HalfOpenProbes: 5,
		RampDuration:   10 * time.Second,
	}
	return GroupConfig{Timeout: time.Second, Breaker: b, CommandBreaker: b}
}

// neverDegradePreset is for writes that must never "succeed" by fallback
// (payments): NoFallback is set, so every failure, timeout, rejection or
// short-circuit reaches the caller as an error; the breaker still fails
// fast while the dependency is down (waiting would not help the caller),
// with the Hystrix thresholds, and the timeout is 2 s.
func neverDegradePreset() GroupConfig {
	b := circuit.Config{
		Window:       metrics.Window{Length: 10 * time.Second, Buckets: 10},
		MinRequests:  20,
		FailureRatio: 0.5,
		OpenDuration: 5 * time.Second,
	}
	return GroupConfig{Timeout: 2 * time.Second, Breaker: b, CommandBreaker: b, NoFallback: true}
}

// dependencyPreset is the recommended configuration for an HTTP or gRPC
// dependency: it trips early and recovers within about half a second of
// the dependency healing, with a bounded cost while it stays sick. Both
// breakers judge a 500 ms window at a 0.5 failure ratio over at least 20
// calls: old successes dilute a fresh outage for half a second at most,
// so it trips about twice as early as a 1 s window (docs/recommended.md
// has the figures); a dependency called fewer than 40 times a second never
// gathers the minimum, so raise Window for such one. A trip opens for
// 200 ms; each failed trial doubles that up to a cap of 400 ms, so a
// healed dependency is found within about 400 ms plus the last probe's
// timeout, and a sick one sees a few probes a second. One probe at a
// time; any failed probe reopens it and five successes in a row close it
// (a dependency failing 70% of calls passes a trial of five by chance in
// 0.24% of trials, one of three in 2.7%). The timeout is the default 1 s:
// set it from the dependency's p99.
func dependencyPreset() GroupConfig {
	b := circuit.Config{
		Window:            metrics.Window{Length: 500 * time.Millisecond, Buckets: 10},
		MinRequests:       20,
		FailureRatio:      0.5,
		OpenDuration:      200 * time.Millisecond,
		OpenBackoff:       2,
		OpenMaxDuration:   400 * time.Millisecond,
		HalfOpenProbes:    1,
		HalfOpenSuccesses: 5,
		HalfOpenFailures:  1,
	}
	return GroupConfig{Timeout: defaultTimeout, Breaker: b, CommandBreaker: b}
}

// govkitPreset is the source's "govkit" defaults: a 5 s window, at least
// 20 calls, a 0.5 failure ratio, 30 s open doubling after each failed
// trial up to 60 s, and 3 probes (in flight at once, and successes to
// close).
func govkitPreset() GroupConfig {
	b := circuit.Config{
		Window:            metrics.Window{Length: 5 * time.Second, Buckets: 5},
		MinRequests:       20,
		FailureRatio:      0.5,
		OpenDuration:      30 * time.Second,
		OpenBackoff:       2,
		OpenMaxDuration:   time.Minute,
		HalfOpenProbes:    3,
		HalfOpenSuccesses: 3,
	}
	return GroupConfig{Timeout: defaultTimeout, Breaker: b, CommandBreaker: b}
}
