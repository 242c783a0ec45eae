package command

import (
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// ThrottleConfig is a group's client-side adaptive throttle
// (GroupConfig.Throttle), the rule of Google's SRE book ("Handling
// Overload"): over the group's metrics window (GroupConfig.Window) the
// group counts its requests and the dependency's accepts, and refuses a
// call locally, before the breakers see it, with probability
//
//	max(0, (requests − K·accepts) / (requests + 1))
//
// A dependency that accepts everything is never throttled (requests ≤
// K·accepts); one that accepts a share a of what it gets receives about
// K·a of the offered load once the throttle settles, so the load reaching
// an overloaded dependency stays near what it can take instead of piling
// on. Requests are the attempts the throttle refused (THROTTLED) and those
// that reached the dependency (SUCCESS, FAILURE, TIMEOUT, BAD_REQUEST);
// accepts are the SUCCESS and BAD_REQUEST ones (the dependency answered).
// Attempts refused by bulwark elsewhere (short-circuited, rejected, rate
// limited, queue timeouts) and cancelled ones are neither: they say
// nothing about the dependency. A throttled call is its own outcome,
// THROTTLED: it falls back, is never retried, its error matches
// ErrRefused, and neither breaker counts it: the throttle is for
// overload, the breaker for outage, and the two can run together.
//
// The zero value is off. It changes live through Reconfigure (the counts
// are kept).
type ThrottleConfig struct {
	// K is the throttle's multiplier: how many requests per accept the
	// group may send before it throttles. In [1, ∞); the SRE book
	// suggests 2. A lower K throttles sooner and wastes less of the
	// dependency's work on requests it refuses; a higher one reacts
	// later. Zero: off.
	K float64

	// Rand, if set, draws the throttle's decisions: a number in [0, 1) per
	// call while the throttle's probability is above zero. It is called
	// concurrently, so it must be safe for concurrent use. Tests and
	// simulations inject a seeded source to replay a run. Default:
	// math/rand/v2's Float64.
	Rand func() float64
}

// ThrottleStatus tells a group's client-side throttle in a GroupSnapshot.
type ThrottleStatus struct {
	K           float64 // the config's K; 0: the throttle is off
	Requests    int64   // requests in the window: THROTTLED and the attempts that reached the dependency
	Accepts     int64   // the dependency's accepts in the window
	Probability float64 // the share of calls the throttle refuses now
}

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

// validate reports an invalid field of the Throttle of a group config.
func (c ThrottleConfig) validate() error {
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
func (t *throttler) status(now time.Duration) ThrottleStatus {
	s := ThrottleStatus{K: t.k}
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
func (c *liveConfig) throttleSnapshot(now time.Duration) ThrottleStatus {
	if c.throttle == nil {
		return ThrottleStatus{}
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
	if c.Adaptive.enabled() {
		s.adaptive, s.limited = &g.adaptive, true
	}
	if g.hook != nil {
		s.limited = true
	}
	return s
}
