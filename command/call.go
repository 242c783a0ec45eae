package command

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/bulwark-go/bulwark/command/priority"
	"github.com/bulwark-go/bulwark/internal/breaker"
	"github.com/bulwark-go/bulwark/metrics"
)

// call is one call of Execute on its way through the pipeline: the state
// its stages share, which are its methods, run in this order by
// commandCall.execute:
//
//	[coalesce] → limit (→ throttle → shed) → admit → isolate → run → classify → record → retry or fallback → finish
//
// (A registry's CallHook, if any, sees each attempt begin, first thing in
// limit's rare path, and end, in retried or finish.)
//
// A stage reads what the stages before it left in the call and leaves its
// own decision there. Two things go by hand instead, in plain sight in
// execute: the call's options to limit (their key), and what the bulkhead
// returned, from isolate to classify. A new stage (an adaptive limit, a
// hedge, coalescing, priority shedding) is one more method in that
// sequence and, if it must remember something, one more field here.
//
// A call lives on Execute's stack and must stay there (Execute allocates
// nothing): a stage may hand a field's value to anything, never the call's
// address to anything that keeps it. The pool's worker, which may outlive
// the call, gets a poolCall of its own. Nor may a field point into a
// caller's stack (the command is held by value; the options stay
// execute's parameter): the compiler cannot tell one field of the call
// from another, so a field handed on anywhere would force all the memory
// they point to onto the heap.
//
// It is also kept small, under the 192 bytes that the compiler zeroes
// without a loop (TestCallFitsTheUnrolledZeroing): Execute zeroes it on
// every call. So what isolate hands classify goes in registers, and what
// can be read off the call is not stored twice (refuser; the probe mark is
// the PROBE event). Execute sets ctx and g in the call's literal, where a
// pointer store needs no write barrier.
type call struct {
	ctx     context.Context
	g       *Group
	c       *commandState
	cs      *commandSettings // the command's settings when the call began: one Reconfigure cannot split a call
	timeout time.Duration    // WithTimeout's, else the command's
	first   time.Duration    // the call's start, for its Latency

	attempt // the attempt under way; a retry starts a new one

	attempts int32          // the attempts made, this one included
	priority priority.Level // WithPriority's, plus 1 (0: none given), for shed
	degraded bool           // the caller gets a fallback's value (Info)
	err      error          // the caller's error, once fallback or finish decided it
}

// attempt is what one attempt of a call decides, stage by stage. A retry
// replaces it whole, so that nothing of one attempt (a permit, a probe
// mark, an event, an error) can leak into the next.
type attempt struct {
	start time.Duration // the attempt's start, read at the call's start or after a backoff
	t0    time.Duration // Run's start: start, moved past a rate limiter that may wait
	now   time.Duration // when the attempt ended: t0 until the limiters or the bulkhead move it

	gp, cp breaker.Permit // the breakers' permits (zero: not taken), released by record

	r      result           // the primary outcome: from classify, or from the stage that refused
	events metrics.EventSet // the events emitted so far; PROBE from admit marks a half-open probe

	judge bool // record judges the breakers' outcomes apart: a probe (admit), or cold
	cold  bool // the call goes to an instance in its warm-up (limit; InstanceWarmUp)
}

// commandCall is a call of a command of type C whose Run returns a T: the
// stages that touch the command or its value (isolate and run, classify,
// retry, fallback) are its methods; the others are call's.
type commandCall[T any, C Runner[T]] struct {
	call
	cmd C // the command, by value, as Execute got it
	v   T // Run's value, then the fallback's: what the caller gets
}

// execute is the pipeline: Execute's call of k.cmd in group k.g with
// context k.ctx and options opts, stage by stage. A
// stage that refuses the attempt (limit, with its throttle and shed steps,
// or admit) has set its outcome, and
// the attempt goes on at record; a retry goes round again from limit, as an
// attempt of its own through the limiters, the breakers and the bulkhead.
func (k *commandCall[T, C]) execute(opts []Option) (T, error) {
	if !k.begin(opts) {
		return k.v, k.err // a nil command: refused before anything is counted
	}
	if k.cs.coalesce && k.coalesce(opts) {
		return k.v, k.err // answered by a flight, and recorded (see coalesce)
	}
	for {
		if k.limit(opts) && k.admit() {
			// isolate hands the attempt to the bulkhead, which runs the run
			// stage (runHeld on the caller's goroutine, or poolCall.run on a
			// worker), and hands classify what came back.
			k.classify(k.isolate())
		}
		k.record()
		if !k.failed() {
			break
		}
		if !k.retry() {
			k.fallback()
			break
		}
	}
	k.finish()
	return k.v, k.err
}

// begin opens the books of a call: it finds the command (a nil command is
// refused with k.err, and begin returns false, before anything is
// counted), its settings and timeout, reads the clock (the call's start)
// and enters the command's in-flight count.
func (k *commandCall[T, C]) begin(opts []Option) bool {
	var name string
	for _, o := range opts { // the last one given wins
		if o.timeout != 0 {
			k.timeout = o.timeout
		}
		if o.name != "" {
			name = o.name
		}
		if o.priority != 0 {
			k.priority = o.priority
		}
	}
	g := k.g
	if k.ctx == nil || g == nil {
		badArgs(k.ctx)
	}
	k.attempts = 1
	c := commandOf[T](g, &k.cmd, name)
	if c == nil {
		k.r.event = metrics.BadRequest
		k.events = metrics.SetOf(metrics.BadRequest, metrics.ExceptionThrown)
		k.err = fmt.Errorf("%w: Execute called with a nil command (%v) in group %q: pass a command value",
			ErrInvalidConfig, reflect.TypeFor[C](), g.name)
		return false
	}
	cs := c.settings.Load()
	k.c, k.cs = c, cs
	if k.timeout == 0 {
		k.timeout = cs.timeout
	}
	start := g.clock.Now()
	k.first, k.start, k.t0, k.now = start, start, start, start
	c.metrics.ObserveMax(start, c.hot.inFlight.Add(1))
	return true
}

// failed reports whether the attempt failed: any outcome but SUCCESS and
// BAD_REQUEST, whose answer (Run's value, and a bad request's error) is
// the caller's as Run gave it. A failed attempt is retried, or the call
// falls back or ends with an *Error.
func (k *call) failed() bool {
	return k.r.event != metrics.Success && k.r.event != metrics.BadRequest
}

// finish is the last stage: it closes the books of the call, whose last
// attempt is k.attempt. The caller's error is a bad request's own (Run's,
// as it returned it), or what fallback decided; EXCEPTION_THROWN says the
// caller gets one. It records the attempt's events and latencies in the
// command's metrics (an earlier attempt was recorded by retried) and
// leaves the in-flight count.
func (k *call) finish() {
	if k.r.event == metrics.BadRequest {
		k.err = k.r.err
	}
	if k.err != nil {
		k.events.Add(metrics.ExceptionThrown)
	}
	run := metrics.NoLatency
	if k.r.ran {
		run = k.r.run
	}
	k.c.done(k.now, k.events, run, k.now-k.start)
	if k.cs.limited { // a hook or an adaptive limit makes the settings limited: one test without
		k.ended()
	}
}

// ended is the end of finish in the limited path: the adaptive limit, if
// any, gets the last attempt's sample, and the registry's CallHook, if
// any, its End.
func (k *call) ended() {
	k.adapt()
	if h := k.g.hook; h != nil {
		k.hookEnd(h)
	}
}

// info tells what happened during the call k, which has finished (or was
// refused by begin): what ExecuteInfo returns. Event, Events and
// RunLatency are the last attempt's.
func (k *call) info() Info {
	in := Info{Event: k.r.event, Events: k.events, Degraded: k.degraded,
		Latency: k.now - k.first, Attempts: int(k.attempts)}
	if k.c != nil {
		in.Command = k.c.name
	}
	if k.r.ran {
		in.RunLatency = k.r.run
	}
	return in
}

// done closes the books of a call of c ended at now: it records the events
// and latencies of its last attempt, and leaves the in-flight count.
func (c *commandState) done(now time.Duration, events metrics.EventSet, run, total time.Duration) {
	c.metrics.Record(now, events, run, total)
	c.hot.inFlight.Add(-1)
}
