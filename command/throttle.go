package command

import (
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"github.com/bulwark-go/bulwark/command/throttle"
	"github.com/bulwark-go/bulwark/metrics"
)

// errThrottled is the cause of a THROTTLED attempt.
var errThrottled = errors.New("client-side throttle: the dependency accepts too few of the group's requests")

// throttler is a group's throttle under one configuration: K and the
// source of draws. It reads its counts from the windows of the group's
// commands, where every attempt is recorded with its primary outcome
// anyway, so a call pays nothing to feed it.
type throttler struct {
	k    float64
	rand func() float64
	g    *Group
}

// throttleEvents are the events the throttle reads: the accepts (SUCCESS,
// BAD_REQUEST), the requests the dependency did not accept (FAILURE,
// TIMEOUT) and the local refusals (THROTTLED).
var throttleEvents = metrics.SetOf(metrics.Success, metrics.BadRequest, metrics.Failure, metrics.Timeout, metrics.Throttled)

// validateThrottle reports an invalid field of the Throttle of a group config.
func validateThrottle(c throttle.Config) error {
	switch {
	case math.IsNaN(c.K) || math.IsInf(c.K, 0) || c.K < 0 || (c.K > 0 && c.K < 1):
		return invalid("Throttle.K %v must be 0 (off) or at least 1", c.K)
	case c.K == 0 && c.Rand != nil:
		return invalid("Throttle.Rand is set but Throttle.K is 0 (the throttle is off)")
	}
	return nil
}

// throttlerOf returns the throttle of config c of group g; nil when it is
// off.
func (g *Group) throttlerOf(c *GroupConfig) *throttler {
	if c.Throttle.K == 0 {
		return nil
	}
	t := &throttler{k: c.Throttle.K, rand: c.Throttle.Rand, g: g}
	if t.rand == nil {
		t.rand = rand.Float64
	}
	return t
}

// status returns the throttle's counts and probability at now, over the
// windows of the group's commands: it reads each of them, so it costs
// O(commands) per call while the throttle is on.
func (t *throttler) status(now time.Duration) throttle.Status {
	s := throttle.Status{K: t.k}
	for _, c := range t.g.commands.Load().byName {
		n := c.metrics.CountsOf(now, throttleEvents)
		s.Accepts += n[metrics.Success] + n[metrics.BadRequest]
		s.Requests += n[metrics.Success] + n[metrics.BadRequest] + n[metrics.Failure] + n[metrics.Timeout] + n[metrics.Throttled]
	}
	s.Probability = max(0, (float64(s.Requests)-t.k*float64(s.Accepts))/float64(s.Requests+1))
	return s
}

// throttle is the stage after limit: the group's client-side throttle
// (GroupConfig.Throttle) admits the attempt, or refuses it as THROTTLED at
// t0, before the breakers see it. Without a throttle it costs one load and
// one test.
func (k *call) throttle() bool {
	t := k.cs.throttle
	return t == nil || k.throttleAdmits(t)
}

// throttleAdmits draws the decision of throttle t on the attempt.
func (k *call) throttleAdmits(t *throttler) bool {
	if p := t.status(k.t0).Probability; p == 0 || t.rand() >= p {
		return true
	}
	k.r = result{event: metrics.Throttled, err: errThrottled}
	k.now = k.t0
	return false
}

// throttleSnapshot returns the status of the group's throttle in force at
// now; the zero value when it is off.
func (c *liveConfig) throttleSnapshot(now time.Duration) throttle.Status {
	if c.throttle == nil {
		return throttle.Status{}
	}
	return c.throttle.status(now)
}

// settingsOf returns the settings of the command called name of group g
// under c: commandSettings (on g's clock and its registry's read-only
// switch), with the group's throttle, and limited when the registry has a
// CallHook (whose Begin the limit stage calls).
func (c *liveConfig) settingsOf(g *Group, name string) *commandSettings {
	s := c.commandSettings(name, g.clock, g.reg.readOnly.Load())
	if c.throttle != nil {
		s.throttle, s.limited = c.throttle, true
	}
	if adaptiveOn(&c.Adaptive) {
		s.adaptive, s.limited = &g.adaptive, true
	}
	if g.hook != nil {
		s.limited = true
	}
	return s
}
