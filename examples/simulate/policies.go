package main

import (
	"context"
	"errors"
	"flag"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/circuit/healthcheck"
)

// Policies are the breakers' operating policies (see circuit.Config), for
// replaying their effect on the virtual clock.
type Policies struct {
	HalfOpenFailures int           // consecutive failed probes that reopen; 0 or 1: any one
	Ramp             string        // ramp-up schedule: "linear" or "doubling"
	RampUp           time.Duration // ramp-up after closing; 0: off
	WarmUp           time.Duration // warm-up from the start of the run; 0: off
	HealthCheck      time.Duration // health-check interval while open; 0: none
}

// The ramp schedules of -ramp.
const (
	rampLinear   = "linear"
	rampDoubling = "doubling"
)

// afterOutage is how long after the outage Result.ForwardedAfterOutage
// counts the calls that reach the recovering dependency.
const afterOutage = 30 * time.Second

// errDown is the health check's answer while the outage lasts.
var errDown = errors.New("dependency down")

// addPolicyFlags defines the policy flags on fs, writing into pp.
func addPolicyFlags(fs *flag.FlagSet, pp *Policies) {
	fs.IntVar(&pp.HalfOpenFailures, "halfopen-failures", 1, "consecutive failed probes that reopen the breaker")
	fs.StringVar(&pp.Ramp, "ramp", rampLinear, "ramp-up `SCHEDULE` after closing (with -ramp-up): linear or doubling (1% doubling every 3s)")
	fs.DurationVar(&pp.RampUp, "ramp-up", 0, "ramp-up duration after closing (0: off)")
	fs.DurationVar(&pp.WarmUp, "warmup", 0, "warm-up from the start of the run: outcomes not counted (0: off)")
	fs.DurationVar(&pp.HealthCheck, "health-check", 0,
		"health-check interval while a breaker is open (0: none); outage: a check passes once the outage is over;\n"+
			"chain: once the callee has a free thread (and, for inventory, the fault lets the check through)")
}

// validate reports the first bad policy flag.
func (pp Policies) validate() error {
	switch {
	case pp.HalfOpenFailures < 0:
		return usage("-halfopen-failures %d must not be negative", pp.HalfOpenFailures)
	case pp.Ramp != rampLinear && pp.Ramp != rampDoubling:
		return usage("-ramp %q must be linear or doubling", pp.Ramp)
	case pp.RampUp < 0:
		return usage("-ramp-up %v must not be negative", pp.RampUp)
	case pp.Ramp == rampDoubling && pp.RampUp == 0:
		return usage("-ramp doubling needs -ramp-up (the longest the ramp lasts)")
	case pp.WarmUp < 0:
		return usage("-warmup %v must not be negative", pp.WarmUp)
	case pp.HealthCheck < 0:
		return usage("-health-check %v must not be negative", pp.HealthCheck)
	}
	return nil
}

// apply sets the policies other than the health check in c.
func (pp Policies) apply(c *circuit.Config) {
	c.HalfOpenFailures = pp.HalfOpenFailures
	c.RampDuration = pp.RampUp
	if pp.Ramp == rampDoubling {
		c.RampDoubling = 3 * time.Second
	}
	c.WarmUp = pp.WarmUp
}

// healthChecks runs a breaker's health checks on the virtual clock: every
// interval from the instant it opens, as the breaker would on real time.
type healthChecks struct {
	checker  *healthcheck.Checker // nil: no health check
	interval time.Duration
	next     time.Duration // when the next check is due; never while not open
	run      int           // checks run
}

// never is a check time that never comes.
const never = time.Duration(1<<63 - 1)

// transition follows the breaker's state: an opening schedules a check
// (with an interval set), any other transition cancels it.
func (h *healthChecks) transition(t circuit.Transition) {
	h.next = never
	if t.To == circuit.Open && h.interval > 0 {
		h.next = t.At + h.interval
	}
}

// runUntil runs the checks due up to at, each at its own instant, with
// setClock moving the virtual clock there.
func (h *healthChecks) runUntil(at time.Duration, setClock func(time.Duration)) {
	for h.next <= at {
		t := h.next
		setClock(t)
		h.next = t + h.interval // a success turns the breaker half-open: transition cancels it
		h.run++
		_ = h.checker.Check(context.Background()) // a failed check just waits for the next
	}
}
