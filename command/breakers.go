package command

import (
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/internal/breaker"
	"github.com/bulwark-go/bulwark/metrics"
)

// engine returns b as the engine it is (package internal/breaker), whose
// AllowAt and RecordAt take the call's own clock readings: a group's
// breakers read its clock unless their config gives another (see instant),
// and the call reads it at its start and its end anyway.
func engine(b *circuit.Breaker) *breaker.Breaker { return (*breaker.Breaker)(b) }

// instant returns the instant of a breaker whose own clock is own (nil:
// the group's) for a call at now, a reading of the group's clock: now
// itself, or a reading of the breaker's own clock.
func instant(own metrics.Clock, now time.Duration) time.Duration {
	if own == nil {
		return now
	}
	return own.Now()
}

// admit is the stage after limit: both breakers, the group's first, must
// admit the attempt at instant t0, else it is SHORT_CIRCUITED (refuser
// tells which refused). Every permit admit takes is released by record,
// whatever the attempt's outcome: so a refusal by the command's breaker
// gives the group's permit back there, uncounted, as for any outcome the
// breakers do not count. A half-open probe of either breaker is marked
// with the PROBE event: isolate tells Run (IsProbe), record judges it
// apart.
func (k *call) admit() bool {
	g := k.g
	gp, err := engine(g.breaker).AllowAt(instant(g.breakerClock, k.t0))
	if err == nil {
		var cp breaker.Permit
		if cp, err = engine(k.c.breaker).AllowAt(instant(g.cmdBreakerClock, k.t0)); err == nil {
			k.gp, k.cp = gp, cp
			if gp.IsProbe() || cp.IsProbe() {
				k.events.Add(metrics.Probe)
				k.judge = true
			}
			return true
		}
	}
	k.gp = gp // zero if the group's breaker refused, else released by record
	k.r = result{event: metrics.ShortCircuited, err: err}
	return false
}

// refuser returns the breaker that refused a SHORT_CIRCUITED attempt (nil
// for any other): the group's, if it gave no permit, else the command's.
func (k *call) refuser() *circuit.Breaker {
	switch {
	case k.r.event != metrics.ShortCircuited:
		return nil
	case k.gp == breaker.Permit{}:
		return k.g.breaker
	}
	return k.c.breaker
}

// record is the stage after classify (or after the stage that refused the
// attempt): it counts the attempt's outcome in both breakers, the ones
// that admitted it (they count only SUCCESS, FAILURE and TIMEOUT, the
// calls that reached the dependency; any other outcome releases the
// permits uncounted, a probe's slot included, a QUEUE_TIMEOUT's too: Run
// never started), with a probe judged apart (judgeProbe) and a call to a
// warming instance not counted at all (InstanceWarmUp); it adds the
// outcome to the call's events, with SLOW for a slow success; and it keeps
// a failure's error for the alerts.
func (k *call) record() {
	g := k.g
	o, lat := k.r.event, k.r.run
	if !k.r.ran {
		lat = k.now - k.t0
	}
	gout, cout := o, o
	if k.judge {
		if k.cold {
			// An instance in its warm-up (InstanceWarmUp): both permits
			// are released uncounted (CANCELLED is never counted), a
			// probe's too, while o stays the outcome in the metrics.
			gout, cout = metrics.Cancelled, metrics.Cancelled
		} else {
			gout, cout = k.judgeProbe(o)
		}
	}
	k.gp.RecordAt(instant(g.breakerClock, k.now), gout, lat)
	k.cp.RecordAt(instant(g.cmdBreakerClock, k.now), cout, lat)
	k.events.Add(k.r.event)
	if k.r.event == metrics.Success && k.cs.slowCall > 0 && k.r.run > k.cs.slowCall {
		k.events.Add(metrics.Slow)
	}
	if k.r.err != nil && g.alerts != nil && (o == metrics.Failure || o == metrics.Timeout) {
		k.callFailed()
	}
}

// callFailed hands a failed attempt's error, with the caller's ctx, to the
// group's Alerter. Not inlined, so that record, on every call, pays only
// the test that guards it (its frame stays as it was without alerts).
//
//go:noinline
func (k *call) callFailed() {
	k.g.alerts.CallFailed(k.ctx, k.g, k.c.name, k.now, k.r.err)
}
