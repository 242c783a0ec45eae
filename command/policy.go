package command

import (
	"fmt"
	"math"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
)

// WarmUp starts a warm-up of d on the group's breaker and on every
// command's breaker (see circuit.Breaker.WarmUp): outcomes recorded in the
// next d are not counted, so instances that a deploy or service discovery
// has just added cannot trip the breakers while their caches are cold.
// Commands first used during the warm-up get the rest of it. Each call
// replaces the warm-up in progress; WarmUp(0) ends it. A negative d is an
// error wrapping ErrInvalidConfig, and changes nothing. docs/policies.md
// tells the incident it prevents.
func (g *Group) WarmUp(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: group %q: WarmUp %v must not be negative", ErrInvalidConfig, g.name, d)
	}
	g.mu.Lock() // commands created meanwhile see the new end
	defer g.mu.Unlock()
	end := g.clock.Now() + d
	if end < d { // overflow: a warm-up without end
		end = math.MaxInt64
	}
	g.warmEnd.Store(int64(end))
	for _, b := range g.breakers(g.commands.Load()) {
		_ = b.WarmUp(d) // d >= 0: never an error
	}
	return nil
}

// inheritWarmUp gives a new command's breaker b the rest of the group's
// warm-up, if one is in progress.
func (g *Group) inheritWarmUp(b *circuit.Breaker) {
	if left := time.Duration(g.warmEnd.Load()) - g.clock.Now(); left > 0 {
		_ = b.WarmUp(left) // left > 0: never an error
	}
}

// breakers returns the group's breaker and those of the commands in t.
func (g *Group) breakers(t *commandTable) []*circuit.Breaker {
	cmds := t.names.all()
	out := make([]*circuit.Breaker, 0, len(cmds)+1)
	out = append(out, g.breaker)
	for _, c := range cmds {
		out = append(out, c.breaker)
	}
	return out
}
