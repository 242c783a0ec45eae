// Package priority configures priority shedding (command.GroupConfig.Priority):
// when a group's bulkhead fills up, the less important calls, by the Level each
// gives with command.WithPriority, are refused first (PRIORITY_REJECTED),
// keeping a share of the bulkhead for the more important ones. docs/priority.md
// tells how to choose the reserves.
package priority

// Level is how much a call matters to the business, from P0 (the most
// important: login, order, payment) to P3 (the least: reports, exports). When a
// group's bulkhead fills up, priority shedding (command.GroupConfig.Priority)
// refuses the less important calls first, keeping room for the more important
// ones. A call gives its level with command.WithPriority.
type Level uint8

// The priorities, most important first.
const (
	P0 Level = iota // never shed: login, order, payment
	P1              // core: search, cart
	P2              // supporting: recommendations, reviews
	P3              // refused first: reports, exports, batch
)

// String returns "P0" ... "P3", or "P?" for a value out of range.
func (p Level) String() string {
	if p <= P3 {
		return "P" + string(rune('0'+p))
	}
	return "P?"
}

// Config turns on priority shedding in a group (command.GroupConfig.Priority):
// when the group's bulkhead is filling up, a call of priority p is refused
// (PRIORITY_REJECTED) while the calls the bulkhead holds already take capacity
// × (1 − Reserve[p]) of it or more, so that the last share of the bulkhead
// stays for the more important calls. The zero value is off.
//
// The bulkhead's occupancy is its calls running (and, in a Thread group, those
// queued, against the pool size plus the queue size): what the bulkhead holds
// when the call arrives. With command.GroupConfig.Adaptive the capacity is the
// adaptive limit in force, so shedding starts when that limit is saturated. The
// check is made just before the call enters the bulkhead; calls arriving at the
// same instant on other goroutines may each pass it before any of them enters,
// so under a burst the low priorities can take a few slots of the reserve. The
// bulkhead's own limit stays exact.
//
// A refused call never starts Run, falls back like a rejected one, and neither
// breaker counts it. Its error matches command.ErrRefused and
// isolation.ErrRejected. With the "never-degrade" preset
// (command.GroupConfig.NoFallback) every refusal, a P0 call's included, reaches
// the caller as an error: a payment fails loudly, it never "succeeds" by
// fallback.
type Config struct {
	// Reserve[p] is the share of the bulkhead (0 <= share < 1) that calls of
	// priority p may not take: room kept for the more important ones. The reserved
	// slots are the share of the capacity rounded up. Reserve[P0] must be 0
	// (nothing is more important than P0), and a priority's reserve must be at
	// least the one before it. All zero: shedding is off. {0, 0.1, 0.25, 0.5} is a
	// starting point: P3 may fill half of the bulkhead, P2 three quarters, P1 nine
	// tenths, P0 all of it.
	Reserve [4]float64
	// Default is the priority of a call that gives none (no command.WithPriority).
	// Default P0: calls that say nothing are never shed.
	Default Level
}
