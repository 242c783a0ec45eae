package command

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"time"

	"github.com/bulwark-go/bulwark/internal/deadline"
	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
)

// isolate is the stage after admit: it gives Run its context (the
// caller's, marked as a probe's, with the call's timeout, cut to the
// caller's deadline less the reserve) and hands the attempt to the group's
// bulkhead, which runs the run stage in it: runHeld on the caller's
// goroutine under a semaphore permit, or poolCall.run on a pool worker
// (runInPool). It returns what came back, for classify (see ran), and
// moves the attempt's end to when it did.
//
// The semaphore's permit is taken here and released by runHeld
// (Semaphore.Enter, Release) rather than through Semaphore.Execute, to
// spare the call path a closure: an ended context, a full or a closed
// semaphore get Execute's errors all the same.
func (k *commandCall[T, C]) isolate() (runCtx context.Context, dl *deadline.Context, lat time.Duration, returned bool, err error) {
	ctx, timeout := k.ctx, k.timeout
	if k.events.Has(metrics.Probe) {
		ctx = probeContext(ctx)
	}
	if k.cs.reserve > 0 {
		timeout = reserved(k.ctx, timeout, k.cs.reserve)
	}
	runCtx, dl = k.timed(ctx, timeout)
	g := k.g
	if g.sem == nil {
		return k.runInPool(runCtx, dl)
	}
	if err = g.sem.Enter(runCtx); err == nil {
		// The permits taken are the calls running now: the group's peak.
		g.peak.ObserveMax(k.t0, int64(g.sem.Stats().Active))
		returned, err = k.runHeld(runCtx)
	}
	k.now = g.clock.Now()
	return runCtx, dl, k.now - k.t0, returned, err
}

// timed returns ctx with the attempt's timeout, and the *deadline.Context
// that sets it (nil when there is no timeout: then runCtx is ctx, and
// nothing is allocated). The deadline.Context is one allocation and arms no
// timer unless Run asks for its Done channel (a Pool times it with a timer
// of its own); its Expired tells a TIMEOUT from the caller's own deadline.
// In a group on the system clock the timeout counts from Run's start (t0),
// as Run's latency does: the Context takes that reading (see
// deadlineOffset) instead of making one.
func (k *call) timed(ctx context.Context, timeout time.Duration) (runCtx context.Context, dl *deadline.Context) {
	if timeout <= 0 {
		return ctx, nil
	}
	dl = k.newDeadline(ctx, timeout)
	return dl, dl
}

// newDeadline is timed's Context for a positive timeout.
func (k *call) newDeadline(ctx context.Context, timeout time.Duration) *deadline.Context {
	if k.g.deadlineClock {
		return deadline.NewAt(ctx, k.t0+deadlineOffset, timeout)
	}
	return deadline.New(ctx, timeout)
}

// deadlineOffset turns a reading of metrics.SystemClock into one of
// deadline.Now, the clock a deadline.Context compares its deadline with: a
// call in a group on the system clock hands its Context the readings it
// makes anyway (its start and its end), and saves the Context two readings
// of its own. The two clocks differ by their origins alone. The offset is
// learnt from pairs of readings, the system clock's first, each of which
// overstates it by the time between its two readings; the least of a few
// pairs is kept, so that a thread descheduled between two readings does not
// skew it. A reading turned is thus late by about the time between two
// readings (tens of nanoseconds), never early: a timeout counts from no
// earlier than t0, and a Run is never judged to have returned before its
// deadline when it did not.
var deadlineOffset = systemToDeadline()

func systemToDeadline() time.Duration {
	offset := time.Duration(math.MaxInt64)
	for range 8 {
		system := metrics.SystemClock().Now()
		offset = min(offset, deadline.Now()-system)
	}
	return offset
}

// runHeld is the run stage on the caller's goroutine: Run with ctx,
// holding a permit of the group's semaphore, which it releases when Run
// returns (true, with Run's error), panics (false, with an
// *isolation.PanicError, as from Semaphore.Execute) or calls
// runtime.Goexit (then the call's books are closed here: see goexit).
// Run's value goes to k.v.
func (k *commandCall[T, C]) runHeld(ctx context.Context) (returned bool, err error) {
	defer func() {
		if !returned {
			if p := recover(); p != nil {
				err = isolation.NewPanicError(p)
			} else {
				k.goexit()
			}
		}
		k.g.sem.Release()
	}()
	k.v, err = k.cmd.Run(ctx)
	return true, err
}

// goexit closes the books of a call whose Run called runtime.Goexit on the
// caller's goroutine (Semaphore): Execute will not return, but the call
// still counts, as a FAILURE in both breakers and in the metrics, and leaves
// the command's in-flight count. (In a Thread group the pool reports a
// Goexit as a panic, and Execute returns a FAILURE as for any panic.)
func (k *call) goexit() {
	g := k.g
	now := g.clock.Now()
	k.gp.RecordAt(instant(g.breakerClock, now), metrics.Failure, now-k.t0)
	k.cp.RecordAt(instant(g.cmdBreakerClock, now), metrics.Failure, now-k.t0)
	k.c.done(now, metrics.SetOf(metrics.Failure, metrics.ExceptionThrown), metrics.NoLatency, now-k.t0)
	g.logger.Error("bulwark: Run called runtime.Goexit; the call counts as a FAILURE",
		slog.String("group", g.name), slog.String("command", k.c.name))
}

// runInPool is isolate for a Thread group, given Run's context and its
// deadline (nil for none), and returns as isolate does: it runs the attempt on a worker of
// the group's pool. The caller leaves at the deadline (or when its ctx ends) even if
// Run goes on: the call is then detached, counted in the command's
// Detached until Run returns. Who owns the poolCall (and Run's value) is
// the pool's decision alone (isolation.Pool.ExecuteOwned): the caller
// after any answer but ErrDetached, the worker's orphan after ErrDetached.
func (k *commandCall[T, C]) runInPool(runCtx context.Context, dl *deadline.Context) (context.Context, *deadline.Context, time.Duration, bool, error) {
	c := k.c
	p := newPoolCall[T, C](c)
	p.c, p.cmd, p.start = c, k.cmd, k.t0
	err := k.g.pool.ExecuteOwned(runCtx, p.work, p.orphaned)
	k.now = k.g.clock.Now()
	switch {
	case err == nil:
		k.v, err = p.v, p.err
		lat := k.now - p.start
		p.recycle(c)
		return runCtx, dl, lat, true, err
	case errors.Is(err, isolation.ErrDetached):
		// p is the worker's now, to count back and recycle: not a field of
		// it may be read here any more.
		c.hot.detached.Add(1)
		return runCtx, dl, 0, false, err
	}
	p.recycle(c)
	return runCtx, dl, 0, false, err
}

// poolCall carries one attempt to a pool worker and its result back. It
// holds the command by value: no interface conversion, so no allocation
// for a command struct. The caller owns it until it hands it to the pool,
// and again after any answer but ErrDetached; after ErrDetached the worker
// owns it (orphaned). Whoever owns it last recycles it.
type poolCall[T any, C Runner[T]] struct {
	c        *commandState
	cmd      C
	v        T
	err      error
	start    time.Duration         // when Run's latency starts
	work     func(context.Context) // p.run, bound once
	orphaned func()                // p.orphan, bound once
}

// newPoolCall returns a poolCall from the command's free list, or a new one.
func newPoolCall[T any, C Runner[T]](c *commandState) *poolCall[T, C] {
	if p, ok := c.calls.Get().(*poolCall[T, C]); ok {
		return p
	}
	p := new(poolCall[T, C])
	p.work, p.orphaned = p.run, p.orphan
	return p
}

// recycle puts p back on the free list of c. Only p's owner may call it.
func (p *poolCall[T, C]) recycle(c *commandState) {
	var zeroV T
	var zeroC C
	p.c, p.cmd, p.v, p.err = nil, zeroC, zeroV, nil
	c.calls.Put(p)
}

// run is the run stage on a pool worker: the work handed to the pool. Run's
// latency counts from the attempt's start (p.start is t0), which the
// hand-off to an idle worker barely delays; only a pool with a queue reads
// the clock here (the worker's one reading), to leave queue time out of it.
func (p *poolCall[T, C]) run(ctx context.Context) {
	g := p.c.group
	if g.cfg().QueueSize > 0 {
		p.start = g.clock.Now()
	}
	g.peak.ObserveMax(p.start, g.hot.running.Add(1))
	defer g.hot.running.Add(-1) // however Run ends: returned, panicked or called runtime.Goexit
	p.v, p.err = p.cmd.Run(ctx)
}

// orphan takes over a detached attempt once Run has ended, on the worker
// (the pool calls it only after the caller got ErrDetached): nobody will
// take Run's value, which goes to Discard, and the call is no longer
// detached.
func (p *poolCall[T, C]) orphan() {
	c := p.c
	c.hot.detached.Add(-1)
	discard(c.group, &p.cmd, p.v)
	p.recycle(c)
}
