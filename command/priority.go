package command

import (
	"fmt"
	"math"

	"github.com/bulwark-go/bulwark/command/priority"
	"github.com/bulwark-go/bulwark/metrics"
)

// numPriorities is the number of priority levels, P0 to P3.
const numPriorities = priority.Level(len(priority.Config{}.Reserve))

// WithPriority gives the call's priority level for the group's priority
// shedding (GroupConfig.Priority); a call without it has
// priority.Config.Default. A
// priority above P3 makes the call fail with a BAD_REQUEST error wrapping
// ErrInvalidConfig when the group sheds by priority (a group that does not
// ignores the option).
func WithPriority(p priority.Level) Option { return Option{priority: min(p, numPriorities) + 1} }

// sheds reports whether c sheds anything.
func sheds(c *priority.Config) bool {
	return c.Reserve != [numPriorities]float64{}
}

// validatePriority reports a bad field of c, named as GroupConfig.Priority's.
func validatePriority(c *priority.Config) error {
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

// ceilingOf returns how many calls the bulkhead may hold for a call of
// priority p to enter it: capacity less the share reserved above p.
func ceilingOf(c *priority.Config, p priority.Level, capacity int) int {
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
// call's priority (the last WithPriority given, which begin read, else the
// config's Default) and refuses the attempt when the
// bulkhead already holds as many calls as that priority may see in it.
func (k *commandCall[T, C]) shedding() bool {
	pc := k.cs.priority
	p := k.priority - 1 // WithPriority's, which begin found
	if k.priority == 0 {
		p = pc.Default
	}
	if p >= numPriorities {
		k.r = result{event: metrics.BadRequest, err: fmt.Errorf("%w: priority above P3: want P0..P3", ErrInvalidConfig)}
		return false
	}
	if p == priority.P0 {
		return true
	}
	held, capacity := k.g.occupancy()
	if ceiling := ceilingOf(pc, p, capacity); held >= ceiling {
		k.r = result{event: metrics.PriorityRejected, err: &priorityError{level: p, held: held, ceiling: ceiling, capacity: capacity}}
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
	level                   priority.Level
	held, ceiling, capacity int
}

// Error says which priority was refused and how full the bulkhead was.
func (e *priorityError) Error() string {
	return fmt.Sprintf("command: %v shed: the bulkhead holds %d of %d calls and %v enters below %d",
		e.level, e.held, e.capacity, e.level, e.ceiling)
}
