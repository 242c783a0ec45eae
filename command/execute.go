package command

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
)

// Execute runs cmd in group g and returns Run's value, a fallback's value,
// or an error.
//
// The steps: both breakers (the group's, then the command's) must admit the
// call, else SHORT_CIRCUITED; the bulkhead must admit it, else
// THREAD_POOL_REJECTED or SEMAPHORE_REJECTED; Run runs on a pool worker
// (Thread) or on the caller's goroutine (Semaphore) with the timeout in its
// ctx; the outcome (SUCCESS, FAILURE, TIMEOUT, BAD_REQUEST or CANCELLED) is
// recorded in the command's metrics and in both breakers; on FAILURE,
// TIMEOUT, a rejection or a short-circuit the command's Fallback, if any,
// runs under the group's fallback limit.
//
// The error is an *Error, except for a BAD_REQUEST, whose error is returned
// exactly as Run returned it (with Run's value). Use ExecuteInfo to learn
// whether a value came from a fallback.
func Execute[T any](ctx context.Context, g *Group, cmd Runner[T], opts ...Option) (T, error) {
	var info Info
	return execute(ctx, g, cmd, opts, &info)
}

// ExecuteInfo is Execute that also tells what happened: the primary
// outcome, every event emitted, whether the value is a fallback's
// (Info.Degraded) and the latencies.
func ExecuteInfo[T any](ctx context.Context, g *Group, cmd Runner[T], opts ...Option) (T, Info, error) {
	var info Info
	v, err := execute(ctx, g, cmd, opts, &info)
	return v, info, err
}

func execute[T any](ctx context.Context, g *Group, cmd Runner[T], opts []Option, info *Info) (v T, err error) {
	var timeout time.Duration
	var name string
	for _, o := range opts {
		if o.timeout != 0 {
			timeout = o.timeout
		}
		if o.name != "" {
			name = o.name
		}
	}
	c := g.command(cmd, name)
	if timeout == 0 {
		timeout = c.timeout
	}
	info.Command, info.Group = c.name, g.name
	c.inFlight.Add(1)
	t0 := g.clock.Now()
	now := t0 // the instant the call ends, read again only if Run or a fallback ran

	var r result
	var gp, cp circuit.Permit
	var refuser *circuit.Breaker
	if timeout < 0 && timeout != NoTimeout {
		r = result{event: metrics.BadRequest, err: fmt.Errorf("%w: WithTimeout(%v): negative (NoTimeout disables the timeout)", ErrInvalidConfig, timeout)}
	} else if gp, cp, refuser, r.err = c.admit(); r.err != nil {
		r.event = metrics.ShortCircuited
	} else {
		if g.sem != nil {
			v, r, now = runOnCaller(ctx, g, cmd, timeout, t0)
		} else {
			v, r, now = runInPool(ctx, c, cmd, timeout, t0)
		}
		o, lat := breakerOutcome(r.event), r.run
		if !r.ran {
			lat = now - t0
		}
		gp.Record(o, lat)
		cp.Record(o, lat)
	}

	info.Event = r.event
	info.Events.add(r.event)
	switch r.event {
	case metrics.Success:
		if g.cfg.SlowCallDuration > 0 && r.run > g.cfg.SlowCallDuration {
			info.Events.add(metrics.Slow)
		}
	case metrics.BadRequest:
		err = r.err
	default:
		var zero T
		v = zero
		e := &Error{Group: g.name, Command: c.name, Event: r.event, Err: r.err, kind: kindOf(ctx, r.event), refuser: refuser}
		if fallsBack(r.event) {
			v, err = fallback(ctx, g, cmd, e, info)
			now = g.clock.Now()
		} else {
			err = e
		}
	}
	if err != nil {
		info.Events.add(metrics.ExceptionThrown)
	}
	info.Latency = now - t0
	if r.ran {
		info.RunLatency = r.run
	}
	c.record(now, info, r.ran)
	c.inFlight.Add(-1)
	return v, err
}

// admit asks both breakers, the group's first. A refusal by the command's
// breaker releases the group's permit uncounted. It returns the refusing
// breaker with its error.
func (c *commandState) admit() (gp, cp circuit.Permit, refuser *circuit.Breaker, err error) {
	g := c.group
	if gp, err = g.breaker.Allow(); err != nil {
		return gp, cp, g.breaker, err
	}
	if cp, err = c.breaker.Allow(); err != nil {
		gp.Record(circuit.Ignored, 0)
		return gp, cp, c.breaker, err
	}
	return gp, cp, nil, nil
}

// record counts the call's events and latencies in the command's window.
// The group's counts are the sum of its commands' (see Group.Snapshot).
func (c *commandState) record(now time.Duration, info *Info, ran bool) {
	for s := uint32(info.Events); s != 0; s &= s - 1 {
		c.metrics.Add(now, metrics.Event(bits.TrailingZeros32(s)))
	}
	if ran {
		c.metrics.ObserveRun(now, info.RunLatency)
	}
	c.metrics.ObserveTotal(now, info.Latency)
}

// timed returns ctx with the call's timeout, and its cancel function (nil
// when there is no timeout: no timer, no allocation).
func timed(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return ctx, nil
	}
	return context.WithTimeoutCause(ctx, timeout, errDeadline)
}

// runOnCaller runs cmd on the caller's goroutine under the group's
// semaphore. It returns Run's value, the primary result and the instant Run
// returned (or the semaphore refused).
func runOnCaller[T any](ctx context.Context, g *Group, cmd Runner[T], timeout, t0 time.Duration) (v T, r result, t1 time.Duration) {
	runCtx, cancel := timed(ctx, timeout)
	var runErr error
	berr := g.sem.Execute(runCtx, func(ctx context.Context) {
		g.metrics.ObserveMax(t0, g.running.Add(1))
		defer g.running.Add(-1)
		v, runErr = cmd.Run(ctx)
	})
	t1 = g.clock.Now()
	late := berr == nil && runCtx.Err() != nil
	r = g.classify(runCtx, berr, runErr, late)
	if cancel != nil {
		cancel()
	}
	if r.ran {
		r.run = t1 - t0
	}
	if late && runErr == nil {
		discard(cmd, v)
	}
	return v, r, t1
}

// poolCall carries one call to a pool worker and its result back. state
// decides who owns the result when the caller leaves at its deadline while
// the worker finishes: exactly one of them moves it out of callRunning, and
// whoever uses the poolCall last recycles it.
type poolCall[T any] struct {
	c     *commandState
	cmd   Runner[T]
	v     T
	err   error
	start time.Duration // when Run's latency starts
	state atomic.Uint32
	work  func(context.Context) // p.run, bound once
}

const (
	callRunning   = iota // Run has not returned and the caller waits
	callDone             // Run returned first: the caller owns the result
	callAbandoned        // the caller left first: the worker drops the result
)

// newPoolCall returns a poolCall from the command's free list, or a new one.
func newPoolCall[T any](c *commandState) *poolCall[T] {
	if p, ok := c.calls.Get().(*poolCall[T]); ok {
		return p
	}
	p := new(poolCall[T])
	p.work = p.run
	return p
}

// recycle puts p back on the free list of c. Only the last user of p may
// call it: the caller once Pool.Execute returned and it has read the result,
// or the worker when the caller had left.
func (p *poolCall[T]) recycle(c *commandState) {
	var zero T
	p.c, p.cmd, p.v, p.err = nil, nil, zero, nil
	p.state.Store(callRunning)
	c.calls.Put(p)
}

// run is the work handed to the pool. Run's latency counts from the call's
// start (p.start is t0), which the hand-off to an idle worker barely delays;
// only a pool with a queue reads the clock again here, to leave queue time
// out of it.
func (p *poolCall[T]) run(ctx context.Context) {
	c := p.c
	g := c.group
	if g.cfg.QueueSize > 0 {
		p.start = g.clock.Now()
	}
	g.metrics.ObserveMax(p.start, g.running.Add(1))
	defer g.running.Add(-1)
	p.v, p.err = p.cmd.Run(ctx)
	if !p.state.CompareAndSwap(callRunning, callDone) {
		// The caller left: nobody will take this result.
		if p.err == nil {
			discard(p.cmd, p.v)
		}
		p.recycle(c)
	}
}

// runInPool runs cmd on a worker of the group's pool; the caller leaves at
// the deadline (or when ctx ends) even if Run goes on.
func runInPool[T any](ctx context.Context, c *commandState, cmd Runner[T], timeout, t0 time.Duration) (v T, r result, t1 time.Duration) {
	g := c.group
	runCtx, cancel := timed(ctx, timeout)
	p := newPoolCall[T](c)
	p.c, p.cmd, p.start = c, cmd, t0
	berr := g.pool.Execute(runCtx, p.work)
	t1 = g.clock.Now()
	var runErr error
	var run time.Duration
	last := true // the caller is p's last user
	switch {
	case berr == nil:
		v, runErr, run = p.v, p.err, t1-p.start
	case errors.Is(berr, isolation.ErrDetached):
		if p.state.CompareAndSwap(callRunning, callAbandoned) {
			last = false // the worker recycles p when Run returns
		} else if p.err == nil {
			discard(cmd, p.v) // Run returned meanwhile, but the answer is TIMEOUT or CANCELLED
		}
	}
	if last {
		p.recycle(c)
	}
	late := berr == nil && runCtx.Err() != nil
	r = g.classify(runCtx, berr, runErr, late)
	if cancel != nil {
		cancel()
	}
	if r.ran {
		r.run = run
	}
	if late && runErr == nil {
		discard(cmd, v)
	}
	return v, r, t1
}

// discard hands a value nobody will receive to the command's Discard.
func discard[T any](cmd Runner[T], v T) {
	if d, ok := cmd.(Discarder[T]); ok {
		d.Discard(v)
	}
}

// fallback serves the command's fallback for the failed call e, under the
// group's fallback limit, and notes the fallback event in info.
func fallback[T any](ctx context.Context, g *Group, cmd Runner[T], e *Error, info *Info) (T, error) {
	var zero T
	fb, ok := cmd.(Fallbacker[T])
	if _, never := cmd.(noFallbacker); never || !ok {
		info.Events.add(metrics.FallbackMissing)
		e.FallbackErr = ErrFallbackMissing
		return zero, e
	}
	var v T
	var ferr error
	serr := g.fallback.Execute(ctx, func(ctx context.Context) { v, ferr = fb.Fallback(ctx, e) })
	switch {
	case serr == nil && ferr == nil:
		info.Events.add(metrics.FallbackSuccess)
		info.Degraded, info.Reason = true, reasons[e.Event]
		return v, nil
	case errors.Is(serr, isolation.ErrRejected):
		info.Events.add(metrics.FallbackRejection)
		e.FallbackErr = ErrFallbackRejected
		return zero, e
	case serr != nil:
		ferr = serr // the fallback panicked, or ctx ended before it could start
	}
	if errors.Is(ferr, ErrFallbackMissing) {
		info.Events.add(metrics.FallbackMissing) // the fallback declined
	} else {
		info.Events.add(metrics.FallbackFailure)
	}
	out := *e // e was handed to the fallback: leave it as the fallback saw it
	out.FallbackErr = ferr
	return zero, &out
}
