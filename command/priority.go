package command

import (
	"fmt"
	"math"

	"github.com/bulwark-go/bulwark/metrics"
)

// Priority is how much a call matters to the business, from P0 (the most
// important: login, order, payment) to P3 (the least: reports, exports).
// When a group's bulkhead fills up, priority shedding (GroupConfig.Priority)
// refuses the less important calls first, keeping room for the more
// important ones. A call gives its priority with WithPriority, or its
// command with a Priority method (Prioritizer).
type Priority uint8

// The priorities, most important first.
const (
	P0 Priority = iota // never shed: login, order, payment
	P1                 // core: search, cart
	P2                 // supporting: recommendations, reviews
	P3                 // refused first: reports, exports, batch
)

// numPriorities is the number of priorities, P0 to P3.
const numPriorities = Priority(len(PriorityConfig{}.Reserve))

// String returns "P0" ... "P3", or "P?" for a value out of range.
func (p Priority) String() string {
	if p < numPriorities {
		return "P" + string(rune('0'+p))
	}
	return "P?"
}

// Prioritizer is implemented by a command that knows its own priority.
// WithPriority overrides it for one call.
type Prioritizer interface {
	Priority() Priority
}

// WithPriority gives the call's priority for the group's priority
// shedding (GroupConfig.Priority), overriding the command's Prioritizer. A
// priority above P3 makes the call fail with a BAD_REQUEST error wrapping
// ErrInvalidConfig when the group sheds by priority (a group that does not
// ignores the option).
func WithPriority(p Priority) Option { return Option{priority: min(p, numPriorities) + 1} }

// PriorityConfig turns on priority shedding in a group: when the group's
// bulkhead is filling up, a call of priority p is refused
// (PRIORITY_REJECTED) while the calls the bulkhead holds already take
// capacity × (1 − Reserve[p]) of it or more, so that the last share of the
// bulkhead stays for the more important calls. The zero value is off.
//
// The bulkhead's occupancy is its calls running (and, in a Thread group,
// those queued, against the pool size plus the queue size): what the
// bulkhead holds when the call arrives. With GroupConfig.Adaptive the
// capacity is the adaptive limit in force, so shedding starts when that
// limit is saturated. The check is made just before the
// call enters the bulkhead; calls arriving at the same instant on other
// goroutines may each pass it before any of them enters, so under a burst
// the low priorities can take a few slots of the reserve. The bulkhead's
// own limit stays exact.
//
// A refused call never starts Run, falls back like a rejected one, and
// neither breaker counts it. Its error matches ErrRefused and
// isolation.ErrRejected. With the "never-degrade" preset (NoFallback) every refusal, a P0
// call's included, reaches the caller as an error: a payment fails loudly,
// it never "succeeds" by fallback.
type PriorityConfig struct {
	// Reserve[p] is the share of the bulkhead (0 <= share < 1) that calls
	// of priority p may not take: room kept for the more important ones.
	// The reserved slots are the share of the capacity rounded up.
	// Reserve[P0] must be 0 (nothing is more important than P0), and a
	// priority's reserve must be at least the one before it. All zero:
	// shedding is off. {0, 0.1, 0.25, 0.5} is a starting point: P3 may
	// fill half of the bulkhead, P2 three quarters, P1 nine tenths, P0
	// all of it.
	Reserve [4]float64
	// Default is the priority of a call that gives none (no WithPriority,
	// no Prioritizer). Default P0: calls that say nothing are never shed.
	Default Priority
}

// enabled reports whether the config sheds anything.
func (c *PriorityConfig) enabled() bool {
	return c.Reserve != [numPriorities]float64{}
}

// validate reports a bad field of c, named as GroupConfig.Priority's.
func (c *PriorityConfig) validate() error {
	if c.Default >= numPriorities {
		return invalid("Priority.Default %d must be P0..P3 (0..%d)", c.Default, numPriorities-1)
	}
	for p, r := range c.Reserve {
		switch {
		case math.IsNaN(r) || r < 0 || r >= 1:
			return invalid("Priority.Reserve[%d] %v must be at least 0 and less than 1", p, r)
		case p == 0 && r != 0:
			return invalid("Priority.Reserve[0] %v must be 0: nothing is more important than P0", r)
		case p > 0 && r < c.Reserve[p-1]:
			return invalid("Priority.Reserve[%d] %v is less than Priority.Reserve[%d] %v: a less important call would get more room",
				p, r, p-1, c.Reserve[p-1])
		}
	}
	return nil
}

// ceiling returns how many calls the bulkhead may hold for a call of
// priority p to enter it: capacity less the share reserved above p.
func (c *PriorityConfig) ceiling(p Priority, capacity int) int {
	return capacity - int(math.Ceil(float64(capacity)*c.Reserve[p]))
}

// shed is priority shedding, the last step of the limit stage (after the
// rate limiters and the throttle, before the breakers: a shed call never
// takes a probe's place). It reports whether the attempt goes on; if not,
// the attempt is PRIORITY_REJECTED (or BAD_REQUEST for a priority out of
// range) and k.r says why. It runs only in a group whose settings are
// limited (GroupConfig.Priority sets it).
func (k *commandCall[T, C]) shed() bool {
	return k.cs.priority == nil || k.shedding()
}

// shedding is shed for a group with priority shedding: it finds the
// call's priority (the last WithPriority given, which begin read, else the command's
// Prioritizer, else the config's Default) and refuses the attempt when the
// bulkhead already holds as many calls as that priority may see in it.
func (k *commandCall[T, C]) shedding() bool {
	pc := k.cs.priority
	p := k.priority - 1 // WithPriority's, which begin found
	if k.priority == 0 {
		p = pc.Default
		if pr, ok := any(k.cmd).(Prioritizer); ok {
			p = pr.Priority()
		}
	}
	if p >= numPriorities {
		k.r = result{event: metrics.BadRequest, err: fmt.Errorf("%w: priority above P3: want P0..P3", ErrInvalidConfig)}
		return false
	}
	if p == P0 {
		return true
	}
	held, capacity := k.g.occupancy()
	if ceiling := pc.ceiling(p, capacity); held >= ceiling {
		k.r = result{event: metrics.PriorityRejected, err: &priorityError{priority: p, held: held, ceiling: ceiling, capacity: capacity}}
		k.now = k.t0
		return false
	}
	return true
}

// occupancy returns how many calls the group's bulkhead holds and how
// many it can: the semaphore's permits taken and its permits, or the
// pool's calls running and queued and its size plus its queue.
func (g *Group) occupancy() (held, capacity int) {
	if g.sem != nil {
		s := g.sem.Stats()
		return s.Active, s.Capacity
	}
	s := g.pool.Stats()
	return s.Active + s.Queued, s.Capacity + s.QueueCapacity
}

// priorityError is the cause of a PRIORITY_REJECTED call (Error.Err): the
// bulkhead held held calls of its capacity, and a call of priority enters
// only while it holds fewer than ceiling.
type priorityError struct {
	priority                Priority
	held, ceiling, capacity int
}

// Error says which priority was refused and how full the bulkhead was.
func (e *priorityError) Error() string {
	return fmt.Sprintf("command: %v shed: the bulkhead holds %d of %d calls and %v enters below %d",
		e.priority, e.held, e.capacity, e.priority, e.ceiling)
}
