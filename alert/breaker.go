package alert

import (
	"time"

	"github.com/bulwark-go/bulwark/circuit"
)

// checkBreaker appends the alerts of the breaker of command cmd ("" for
// the group's), as read in its snapshot b, to out. s.mu is held.
func (w *Watcher) checkBreaker(out []Alert, s *watched, group, cmd string, b circuit.Snapshot) []Alert {
	o := s.open[cmd]
	if b.State == circuit.Closed || b.Mode == circuit.ForcedOpen {
		if o != nil {
			delete(s.open, cmd)
			out = w.resolved(out, group, cmd, b, o)
		}
		return out
	}
	// The breaker's clock now, and the outage as its history tells it.
	clock := breakerNow(b)
	seen := outage{since: clock - b.Since, health: b.Health, tier: -1}
	if n := len(b.Transitions); n > 0 {
		seen.reason = b.Transitions[n-1].Reason
	}
	found := false
	for i := len(b.Transitions) - 1; i >= 0; i-- {
		if tr := b.Transitions[i]; tr.From == circuit.Closed {
			seen.since, seen.reason, seen.health, found = tr.At, tr.Reason, tr.Health, true
			break
		}
	}
	if o != nil && found && seen.since != o.since {
		out = w.resolved(out, group, cmd, b, o) // it closed and tripped again between two checks
		o = nil
	}
	if o == nil {
		seen.errors = s.rings[cmd].samples()
		o = &seen
		s.open[cmd] = o
	}
	o.seen, o.state = clock, b.State
	openFor := clock - o.since
	tier := -1
	for i, t := range w.cfg.Tiers {
		if openFor >= t.After {
			tier = i
		}
	}
	if tier > o.tier {
		o.tier = tier
		out = append(out, Alert{Kind: Open, Group: group, Command: cmd, Tier: w.cfg.Tiers[tier].Name,
			OpenFor: openFor, State: b.State, Reason: o.reason, Health: o.health, Errors: o.errors})
	}
	return out
}

// resolved appends the Resolved alert of outage o, if it fired a tier.
func (w *Watcher) resolved(out []Alert, group, cmd string, b circuit.Snapshot, o *outage) []Alert {
	if o.tier < 0 {
		return out
	}
	end := breakerNow(b) // unless a transition says when it closed
	for _, tr := range b.Transitions {
		if tr.At >= o.since && tr.To == circuit.Closed {
			end = tr.At
			break
		}
	}
	return append(out, Alert{Kind: Resolved, Group: group, Command: cmd, Tier: w.cfg.Tiers[o.tier].Name,
		OpenFor: end - o.since, State: b.State, Reason: o.reason, Health: o.health, Errors: o.errors})
}

// breakerNow returns the instant of the breaker's clock at which b was
// taken: its last transition's, plus the time since.
func breakerNow(b circuit.Snapshot) time.Duration {
	now := b.Since
	if n := len(b.Transitions); n > 0 {
		now += b.Transitions[n-1].At
	}
	return now
}
