package circuit

import (
	"time"

	"github.com/bulwark-go/bulwark/internal/breaker"
)

// Snapshot describes a breaker at one instant.
type Snapshot struct {
	// Config is the configuration in force (as Breaker.Config returns it):
	// the thresholds the breaker judges Health by, what a dashboard shows
	// beside it.
	Config       Config
	State        State         // effective state
	Mode         Mode          // current mode
	Since        time.Duration // time in the current state: since the last transition, or since creation
	OpenDuration time.Duration // open duration in force (backed off after failed trials)
	RetryAfter   time.Duration // Open (not forced): time left before it turns half-open; else 0

	// Half-open progress, 0 outside the half-open state: probes in flight,
	// and consecutive probe successes and failures so far
	// (Config.HalfOpenSuccesses of the first close the breaker,
	// HalfOpenFailures of the second reopen it).
	Probes, ProbeSuccesses, ProbeFailures int

	RampShare   float64      // share of calls admitted now; 1 when not ramping up
	Health      Health       // the window now
	Transitions []Transition // the last few transitions, oldest first, at most 8: the last one's Reason is why the breaker is in its state
	// TransitionCounts counts every transition since the breaker was
	// created, one entry per kind (from, to, reason) that has happened,
	// in the order each kind first happened: what a counter such as
	// Prometheus's bulwark_breaker_transitions_total exports, which sees
	// flaps that a state sampled now and then misses.
	TransitionCounts []TransitionCount

	// WarmUpLeft is how long outcomes are not counted yet (Config.WarmUp
	// after creation, or a WarmUp call); 0 when they are.
	WarmUpLeft time.Duration
	// HealthCheck is the progress of the health checker started on the
	// breaker (package circuit/healthcheck) as a status line: the checks
	// run and failed so far, and how the last one ended, with its error's
	// text as Error returns it ("14 checks, 3 failed; last failed: dial
	// tcp 10.0.0.7:5432: connect: connection refused", "1 check, 0 failed;
	// last passed"); "" without a checker (or once it is stopped) and
	// before its first check.
	HealthCheck string
	// Shared is the status of the outside party that shares the breaker's
	// judgment, such as the fleet of module redis ("shared state:
	// degraded (…)"); "" when the breaker judges alone.
	Shared string
}

// Health summarises the breaker's window: the calls that reached the
// dependency and the two ratios the breaker trips on.
type Health struct {
	Requests   int64   // Success + Failure + Timeout
	Failures   int64   // Failure
	Timeouts   int64   // Timeout
	Slow       int64   // successes slower than SlowCallDuration
	ErrorRatio float64 // (Failures + Timeouts) / Requests; 0 when Requests is 0
	SlowRatio  float64 // Slow / Requests; 0 when Requests is 0

	// ErrorBound and SlowBound are what the breaker compares with
	// FailureRatio and SlowCallRatio: with Config.Confidence set, the
	// lower bounds of the two ratios' Wilson score intervals at that
	// confidence; without, ErrorRatio and SlowRatio themselves.
	ErrorBound, SlowBound float64
}

// Transition records one change of effective state.
type Transition struct {
	Name         string        // the breaker's name
	From, To     State         // effective states before and after
	Reason       Reason        // why
	At           time.Duration // clock reading when the breaker made the change
	Health       Health        // the window when the change was made
	OpenDuration time.Duration // the open duration in force after the change
}

// Snapshot returns the breaker's current state, progress, health and recent
// transitions. Like Allow, it first applies any transition that time alone
// has made due. It allocates (the copy of the transition history).
func (b *Breaker) Snapshot() Snapshot {
	s := b.engine().Snapshot()
	out := Snapshot{
		Config:         configOf(s.Settings),
		State:          State(s.State),
		Mode:           Mode(s.Mode),
		Since:          s.Since,
		OpenDuration:   s.OpenDuration,
		RetryAfter:     s.RetryAfter,
		Probes:         s.Probes,
		ProbeSuccesses: s.ProbeSuccesses,
		ProbeFailures:  s.ProbeFailures,
		RampShare:      s.RampShare,
		Health:         Health(s.Health),
		Transitions:    make([]Transition, len(s.Transitions)),
		WarmUpLeft:     s.WarmUpLeft,
		HealthCheck:    s.HealthCheck,
		Shared:         s.Shared,
	}
	for i, t := range s.Transitions {
		out.Transitions[i] = transitionOf(t)
	}
	for _, c := range s.Counts {
		out.TransitionCounts = append(out.TransitionCounts, TransitionCount{From: State(c.From), To: State(c.To), Reason: Reason(c.Reason), N: c.N})
	}
	return out
}

// TransitionCount is how many transitions a breaker has made from one
// state to another for one reason since it was created.
type TransitionCount struct {
	From, To State
	Reason   Reason
	N        uint64
}

// transitionOf returns the public form of the engine's transition t.
func transitionOf(t breaker.Transition) Transition {
	return Transition{Name: t.Name, From: State(t.From), To: State(t.To), Reason: Reason(t.Reason),
		At: t.At, Health: Health(t.Health), OpenDuration: t.OpenDuration}
}
