package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
)

// Execute runs cmd in group g and returns Run's value, a fallback's value,
// or an error. T is the command's result type and C the command's own type,
// both inferred: command.Execute(ctx, g, getProfile{id: 7}).
//
// The steps: the rate limiters, if any (the group's, then the command's),
// must admit the call, else RATE_LIMITED; both breakers (the group's, then
// the command's) must admit it, else SHORT_CIRCUITED; the bulkhead must
// admit it, else THREAD_POOL_REJECTED or SEMAPHORE_REJECTED; Run runs on a
// pool worker (Thread) or on the caller's goroutine (Semaphore) with the
// timeout in its ctx; the outcome (SUCCESS, FAILURE, TIMEOUT, QUEUE_TIMEOUT,
// BAD_REQUEST or CANCELLED) is recorded in the command's metrics and in both
// breakers; on FAILURE, TIMEOUT, QUEUE_TIMEOUT, a rejection, a short-circuit
// or a rate-limit refusal the command's Fallback, if any, runs under the
// group's fallback limit.
//
// In a group with retries (GroupConfig.Retry), a FAILURE or TIMEOUT of an
// Idempotent command is tried again, each attempt through all the steps
// above, before the fallback; see RetryConfig.
//
// The error is an *Error, except for a BAD_REQUEST, whose error is returned
// exactly as Run returned it (with Run's value). Use ExecuteInfo to learn
// whether a value came from a fallback.
func Execute[T any, C Runner[T]](ctx context.Context, g *Group, cmd C, opts ...Option) (T, error) {
	var info Info
	v, _, err := execute[T](ctx, g, &cmd, opts, &info)
	return v, err
}

// ExecuteInfo is Execute that also tells what happened: the primary
// outcome, every event emitted, whether the value is a fallback's
// (Info.Degraded) and the latencies.
func ExecuteInfo[T any, C Runner[T]](ctx context.Context, g *Group, cmd C, opts ...Option) (T, Info, error) {
	var info Info
	v, c, err := execute[T](ctx, g, &cmd, opts, &info)
	// What only a caller of ExecuteInfo reads is filled in here, off
	// Execute's path: the names, and the first attempt (execute counts the
	// retries).
	info.Group = g.name
	if c != nil {
		info.Command = c.name
	}
	info.Attempts++
	return v, info, err
}

// execute is Execute. The clock is read at the start (start) and when Run
// returns or the call is refused (now); both readings are handed to the
// rate limiters and breakers (when they share the group's clock) and to the
// metrics, so that a call that needs no fallback reads the clock twice in
// all. A retry (see retryAgain) goes round the loop again: each attempt is
// counted as a call of its own, and the call leaves the in-flight count
// once, when its last attempt ends. It also returns the command's state
// (nil for a nil command), for ExecuteInfo.
func execute[T any, C Runner[T]](ctx context.Context, g *Group, cmd *C, opts []Option, info *Info) (v T, c *commandState, err error) {
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
	if ctx == nil || g == nil {
		badArgs(ctx)
	}
	c = commandOf[T](g, cmd, name)
	if c == nil {
		info.Event = metrics.BadRequest
		info.Events = metrics.SetOf(metrics.BadRequest, metrics.ExceptionThrown)
		return v, nil, fmt.Errorf("%w: Execute called with a nil command (%v) in group %q: pass a command value",
			ErrInvalidConfig, reflect.TypeFor[C](), g.name)
	}
	cs := c.settings.Load()
	if timeout == 0 {
		timeout = cs.timeout
	}
	start := g.clock.Now() // the attempt's start: the call's, until a retry
	first := start         // the call's start, for its Latency
	c.metrics.ObserveMax(start, c.hot.inFlight.Add(1))
	for {
		t0 := start // Run's start: moves past a rate limiter's wait
		now := t0   // the instant the attempt ends, read again only if Run or a fallback ran
		var r result
		var gp, cp circuit.Permit
		var refuser *circuit.Breaker
		if timeout < 0 && timeout != NoTimeout {
			r = result{event: metrics.BadRequest, err: fmt.Errorf("%w: WithTimeout(%v): negative (NoTimeout disables the timeout)", ErrInvalidConfig, timeout)}
		} else if cs.limited && c.refusedByLimits(ctx, cs, opts, &r, &t0) {
			now = t0
		} else if gp, cp, refuser, r.err = c.admit(t0); r.err != nil {
			r.event = metrics.ShortCircuited
		} else {
			runCtx, runTimeout := ctx, timeout
			if gp.IsProbe() || cp.IsProbe() {
				runCtx, info.Probe = probeContext(ctx), true
			}
			if cs.reserve > 0 {
				runTimeout = reserved(ctx, timeout, cs.reserve)
			}
			if g.sem != nil {
				v, r, now = runOnCaller[T](runCtx, c, cmd, runTimeout, t0, gp, cp)
			} else {
				v, r, now = runInPool[T](runCtx, c, cmd, runTimeout, t0)
			}
			o, lat := breakerOutcome(r.event), r.run
			if !r.ran {
				lat = now - t0
			}
			gout, cout := o, o
			if info.Probe {
				gout, cout = c.judgeProbe(cs, gp, cp, o, r.err, info)
			}
			gp.RecordAt(instant(g.breakerClock, now), gout, lat)
			cp.RecordAt(instant(g.cmdBreakerClock, now), cout, lat)
		}

		info.Event = r.event
		info.Events.Add(r.event)
		switch r.event {
		case metrics.Success:
			if cs.slowCall > 0 && r.run > cs.slowCall {
				info.Events.Add(metrics.Slow)
			}
		case metrics.BadRequest:
			err = r.err
		default:
			if r.ran {
				discard(g, cmd, v) // Run's value, returned with its error or too late: nobody gets it
			}
			var zero T
			v = zero
			c.recordError(now, r.event, r.err)
			if rc := cs.retry; rc != nil && rc.allows(info.Attempts+1, r.event) && c.retryAgain(ctx, any(*cmd), rc, cs, info.Attempts+1, &r, now) {
				start = c.retried(start, now, &r, info)
				continue
			}
			e := &Error{Group: g.name, Command: c.name, Event: r.event, Err: r.err, kind: kindOf(ctx, r), refuser: refuser}
			if fallsBack(r.event) {
				v, err = fallback[T](ctx, g, cmd, cs, e, info)
				now = g.clock.Now()
			} else {
				err = e
			}
		}
		if err != nil {
			info.Events.Add(metrics.ExceptionThrown)
		}
		info.Latency = now - first
		run := metrics.NoLatency
		if r.ran {
			info.RunLatency, run = r.run, r.run
		}
		c.finish(now, info.Events, run, now-start)
		return v, c, err
	}
}

// finish closes the books of a call of c (its last attempt): it records
// the events and latencies ended at now, and leaves the in-flight count.
func (c *commandState) finish(now time.Duration, events metrics.EventSet, run, total time.Duration) {
	c.metrics.Record(now, events, run, total)
	c.hot.inFlight.Add(-1)
}

// goexit closes the books of a call whose Run called runtime.Goexit on the
// caller's goroutine (Semaphore): Execute will not return, but the call
// still counts, as a FAILURE in both breakers and in the metrics, and leaves
// the command's in-flight count. (In a Thread group the pool reports a
// Goexit as a panic, and Execute returns a FAILURE as for any panic.)
func (c *commandState) goexit(gp, cp circuit.Permit, t0 time.Duration) {
	g := c.group
	now := g.clock.Now()
	gp.RecordAt(instant(g.breakerClock, now), circuit.Failure, now-t0)
	cp.RecordAt(instant(g.cmdBreakerClock, now), circuit.Failure, now-t0)
	c.finish(now, metrics.SetOf(metrics.Failure, metrics.ExceptionThrown), metrics.NoLatency, now-t0)
	g.logger.Error("bulwark: Run called runtime.Goexit; the call counts as a FAILURE",
		slog.String("group", g.name), slog.String("command", c.name))
}

// badArgs panics for a call of Execute with a nil ctx or a nil group (g is
// nil unless ctx is): a programming error, answered with a message saying
// what to pass, as http.Request.WithContext does for a nil context. (A nil
// command is refused with an error wrapping ErrInvalidConfig, before
// anything is counted: it is the caller's bug, not the dependency's
// failure; see commandOf.)
func badArgs(ctx context.Context) {
	if ctx == nil {
		panic("command: Execute called with a nil context.Context; pass context.Background() or the request's context")
	}
	panic("command: Execute called with a nil *Group; create one with Registry.NewGroup")
}

// isNil reports whether cmd is a nil command: a nil interface, or an
// interface holding a nil pointer.
func isNil(cmd any) bool {
	v := reflect.ValueOf(cmd)
	return !v.IsValid() || v.Kind() == reflect.Pointer && v.IsNil()
}

// admit asks both breakers, the group's first, at instant now. A refusal by
// the command's breaker releases the group's permit uncounted. It returns
// the refusing breaker with its error.
func (c *commandState) admit(now time.Duration) (gp, cp circuit.Permit, refuser *circuit.Breaker, err error) {
	g := c.group
	if gp, err = g.breaker.AllowAt(instant(g.breakerClock, now)); err != nil {
		return gp, cp, g.breaker, err
	}
	if cp, err = c.breaker.AllowAt(instant(g.cmdBreakerClock, now)); err != nil {
		gp.Record(circuit.Ignored, 0) // not counted: reads no clock
		return gp, cp, c.breaker, err
	}
	return gp, cp, nil, nil
}

// timed returns ctx with the call's timeout, and its cancel function (nil
// when there is no timeout: no timer, no allocation). Its deadline's cause
// is errDeadline, which tells a TIMEOUT from the caller's own deadline.
func timed(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return ctx, nil
	}
	return context.WithTimeoutCause(ctx, timeout, errDeadline)
}

// runOnCaller runs cmd on the caller's goroutine under the group's
// semaphore. It returns Run's value, the primary result and the instant Run
// returned (or the semaphore refused). It takes and releases the permit
// itself (Semaphore.Enter, Release) rather than through Semaphore.Execute,
// to spare the call path a closure: an ended context, a full or a closed
// semaphore get Execute's errors all the same. gp and cp are the breakers'
// permits, for a Run that calls runtime.Goexit (see commandState.goexit).
func runOnCaller[T any, C Runner[T]](ctx context.Context, c *commandState, cmd *C, timeout, t0 time.Duration, gp, cp circuit.Permit) (v T, r result, t1 time.Duration) {
	g := c.group
	runCtx, cancel := timed(ctx, timeout)
	var runErr error
	berr := g.sem.Enter(runCtx)
	if berr == nil {
		// The permits taken are the calls running now: the group's peak.
		g.metrics.ObserveMax(t0, int64(g.sem.Stats().Active))
		v, runErr, berr = runHeld[T](runCtx, c, cmd, t0, gp, cp)
	}
	t1 = g.clock.Now()
	if berr == nil && runErr == nil && runCtx.Err() == nil { // the common case, decided inline
		r = result{event: metrics.Success, run: t1 - t0, ran: true}
	} else {
		r = g.outcome(runCtx, berr, runErr, t1-t0)
	}
	if cancel != nil {
		cancel()
	}
	return v, r, t1
}

// runHeld runs cmd holding a permit of the group's semaphore, and releases
// it when Run returns, panics (perr is then an *isolation.PanicError, as
// from Semaphore.Execute) or calls runtime.Goexit (then the call's books are
// closed here: see commandState.goexit).
func runHeld[T any, C Runner[T]](ctx context.Context, c *commandState, cmd *C, t0 time.Duration, gp, cp circuit.Permit) (v T, runErr, perr error) {
	returned := false
	defer func() {
		if !returned {
			if p := recover(); p != nil {
				perr = isolation.NewPanicError(p)
			} else {
				c.goexit(gp, cp, t0)
			}
		}
		c.group.sem.Release()
	}()
	v, runErr = (*cmd).Run(ctx)
	returned = true
	return v, runErr, nil
}

// poolCall carries one call to a pool worker and its result back. state
// decides who owns the result when the caller leaves at its deadline while
// the worker finishes: exactly one of them moves it out of callRunning, and
// whoever uses the poolCall last recycles it. It holds the command by value:
// no interface conversion, so no allocation for a command struct.
type poolCall[T any, C Runner[T]] struct {
	c     *commandState
	cmd   C
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
func newPoolCall[T any, C Runner[T]](c *commandState) *poolCall[T, C] {
	if p, ok := c.calls.Get().(*poolCall[T, C]); ok {
		return p
	}
	p := new(poolCall[T, C])
	p.work = p.run
	return p
}

// recycle puts p back on the free list of c. Only the last user of p may
// call it: the caller once Pool.Execute returned and it has read the result,
// or the worker when the caller had left.
func (p *poolCall[T, C]) recycle(c *commandState) {
	var zeroV T
	var zeroC C
	p.c, p.cmd, p.v, p.err = nil, zeroC, zeroV, nil
	p.state.Store(callRunning)
	c.calls.Put(p)
}

// run is the work handed to the pool. Run's latency counts from the call's
// start (p.start is t0), which the hand-off to an idle worker barely delays;
// only a pool with a queue reads the clock here (the worker's one reading),
// to leave queue time out of it.
func (p *poolCall[T, C]) run(ctx context.Context) {
	c := p.c
	g := c.group
	if g.cfg().QueueSize > 0 {
		p.start = g.clock.Now()
	}
	g.metrics.ObserveMax(p.start, g.hot.running.Add(1))
	defer p.finish(c)
	p.v, p.err = p.cmd.Run(ctx)
}

// finish ends the worker's part of a call however Run ended: returned,
// panicked or called runtime.Goexit (the pool reports the last two to a
// caller still waiting, or logs them).
func (p *poolCall[T, C]) finish(c *commandState) {
	c.group.hot.running.Add(-1)
	if p.state.CompareAndSwap(callRunning, callDone) {
		return
	}
	// The caller left: nobody will take this result.
	c.hot.detached.Add(-1)
	discard(c.group, &p.cmd, p.v)
	p.recycle(c)
}

// runInPool runs cmd on a worker of the group's pool; the caller leaves at
// the deadline (or when ctx ends) even if Run goes on: the call is then
// detached, counted in the command's Detached until Run returns.
func runInPool[T any, C Runner[T]](ctx context.Context, c *commandState, cmd *C, timeout, t0 time.Duration) (v T, r result, t1 time.Duration) {
	g := c.group
	runCtx, cancel := timed(ctx, timeout)
	p := newPoolCall[T, C](c)
	p.c, p.cmd, p.start = c, *cmd, t0
	berr := g.pool.Execute(runCtx, p.work)
	t1 = g.clock.Now()
	var runErr error
	var run time.Duration
	last := true // the caller is p's last user
	switch {
	case berr == nil:
		v, runErr, run = p.v, p.err, t1-p.start
	case errors.Is(berr, isolation.ErrDetached):
		// Count before the swap, so that the worker's decrement never
		// comes first.
		c.hot.detached.Add(1)
		if p.state.CompareAndSwap(callRunning, callAbandoned) {
			last = false // the worker recycles p when Run returns
		} else {
			c.hot.detached.Add(-1)
			discard(g, cmd, p.v) // Run returned meanwhile, but the answer is TIMEOUT or CANCELLED
		}
	}
	if last {
		p.recycle(c)
	}
	if berr == nil && runErr == nil && runCtx.Err() == nil { // the common case, decided inline
		r = result{event: metrics.Success, run: run, ran: true}
	} else {
		r = g.outcome(runCtx, berr, runErr, run)
	}
	if cancel != nil {
		cancel()
	}
	return v, r, t1
}

// discard hands a value of Run that nobody will receive to the command's
// Discard, unless it is the zero value. A panic in Discard is logged, never
// passed on. It converts cmd to an interface (an allocation for a command
// struct with fields), as fallback does: both are off the successful path.
func discard[T any, C Runner[T]](g *Group, cmd *C, v T) {
	d, ok := any(*cmd).(Discarder[T])
	if !ok || reflect.ValueOf(&v).Elem().IsZero() {
		return
	}
	defer g.recoverHook("Discard")
	d.Discard(v)
}

// recoverHook is deferred around a call of user code that must not end the
// call it serves (IsBadRequest, Discard): it logs a panic with its stack.
func (g *Group) recoverHook(hook string) {
	if p := recover(); p != nil {
		g.logger.Error("bulwark: "+hook+" panicked", slog.String("group", g.name),
			slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
	}
}

// fallback serves the command's fallback for the failed call e, under the
// group's fallback limit, and notes the fallback event in info. Under
// settings cs of a NoFallback group it serves none, as for a command
// without a fallback.
func fallback[T any, C Runner[T]](ctx context.Context, g *Group, cmd *C, cs *commandSettings, e *Error, info *Info) (T, error) {
	var zero T
	fb, ok := FallbackOf[T](any(*cmd))
	if !ok || cs.noFallback {
		info.Events.Add(metrics.FallbackMissing)
		e.FallbackErr = ErrFallbackMissing
		return zero, e
	}
	var v T
	var ferr error
	serr := g.fallback.Execute(ctx, func(ctx context.Context) { v, ferr = fb.Fallback(ctx, e) })
	switch {
	case serr == nil && (ferr == nil || errors.Is(ferr, ErrDeferred)):
		info.Events.Add(metrics.FallbackSuccess)
		info.Degraded, info.Deferred = true, ferr != nil
		return v, nil
	case errors.Is(serr, isolation.ErrRejected):
		info.Events.Add(metrics.FallbackRejection)
		e.FallbackErr = ErrFallbackRejected
		return zero, e
	case serr != nil:
		ferr = serr // the fallback panicked, or ctx ended before it could start
	}
	if errors.Is(ferr, ErrFallbackMissing) {
		info.Events.Add(metrics.FallbackMissing) // the fallback declined
	} else {
		info.Events.Add(metrics.FallbackFailure)
	}
	out := *e // e was handed to the fallback: leave it as the fallback saw it
	out.FallbackErr = ferr
	return zero, &out
}
