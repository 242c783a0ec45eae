package alert

import (
	"fmt"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
)

// Action returns the line that tells the person on call what to do about
// a, with the figures to do it by: the dependency (the group) and command,
// how long its breaker has been open and why, or the degraded share.
// Examples:
//
//	check the health of dependency payments (command charge); breaker open for 10 min, reason error_ratio: 12 of 20 calls failed or timed out
//	no action: dependency payments (command charge) recovered; its breaker was open for 35 min (reached P1), reason error_ratio
//	check the health of dependency payments (command charge); 9.5% of its 21 calls in the window were answered by a fallback
func (a Alert) Action() string {
	what := a.subject()
	switch a.Kind {
	case Open:
		state := ""
		if a.State != circuit.Open {
			state = " (now " + a.State.String() + ")"
		}
		return fmt.Sprintf("check the health of %s; breaker open for %s%s, reason %s%s",
			what, minutes(a.OpenFor), state, a.Reason, a.evidence())
	case Resolved:
		if a.Unwatched {
			return fmt.Sprintf("no action: %s is no longer watched (its group closed); its breaker was open for at least %s (reached %s), reason %s",
				what, minutes(a.OpenFor), a.Tier, a.Reason)
		}
		return fmt.Sprintf("no action: %s recovered; its breaker was open for %s (reached %s), reason %s",
			what, minutes(a.OpenFor), a.Tier, a.Reason)
	case Degraded:
		return fmt.Sprintf("check the health of %s; %.1f%% of its %d calls in the window were answered by a fallback",
			what, 100*a.DegradedRate, a.Calls)
	case DegradedCleared:
		if a.Unwatched {
			return fmt.Sprintf("no action: %s is no longer watched (its group closed) while degraded", what)
		}
		return fmt.Sprintf("no action: %s is no longer degraded (%.1f%% of %d calls answered by a fallback)",
			what, 100*a.DegradedRate, a.Calls)
	}
	return "unknown alert " + a.Kind.String() + " of " + what
}

// subject names a's dependency and command, or its group's breaker.
func (a Alert) subject() string {
	if a.Command == "" {
		return "dependency " + a.Group + " (group breaker)"
	}
	return "dependency " + a.Group + " (command " + a.Command + ")"
}

// evidence is the window behind a trip, after its reason: the ratio that
// tripped it, in calls.
func (a Alert) evidence() string {
	h := a.Health
	switch {
	case h.Requests == 0:
		return ""
	case a.Reason == circuit.ReasonSlowRatio:
		return fmt.Sprintf(": %d of %d calls slow", h.Slow, h.Requests)
	}
	return fmt.Sprintf(": %d of %d calls failed or timed out", h.Failures+h.Timeouts, h.Requests)
}

// minutes says d in whole minutes from one minute up, else in seconds.
func minutes(d time.Duration) string {
	if d >= time.Minute {
		return fmt.Sprintf("%d min", d/time.Minute)
	}
	return fmt.Sprintf("%d s", d/time.Second)
}
