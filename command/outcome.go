package command

import (
	"context"
	"errors"
	"time"

	"github.com/bulwark-go/bulwark/internal/deadline"
	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
)

// fallsBack reports whether a call with primary outcome e tries a fallback.
func fallsBack(e metrics.Event) bool {
	switch e {
	case metrics.Failure, metrics.Timeout, metrics.ShortCircuited,
		metrics.ThreadPoolRejected, metrics.SemaphoreRejected, metrics.QueueTimeout,
		metrics.RateLimited, metrics.ReadOnly, metrics.Throttled, metrics.PriorityRejected:
		return true
	}
	return false
}

// ended returns the outcome of a call whose run context ended, given the
// call's deadline (nil for none): TIMEOUT when that deadline ended it,
// CANCELLED when the caller's context did.
func ended(dl *deadline.Context) metrics.Event {
	if dl != nil && dl.Expired() {
		return metrics.Timeout
	}
	return metrics.Cancelled
}

// result is how the primary path of one call ended, before any fallback.
type result struct {
	err   error         // the cause when event is not Success
	run   time.Duration // Run's latency; valid when ran
	event metrics.Event
	ran   bool // Run returned before the caller was answered
}

// classify is the stage after run: it decides the attempt's primary
// outcome from what isolate handed back: Run's context runCtx (and its
// deadline, dl: nil for none); whether Run returned, and then err is
// Run's error and lat its latency, or else err is what the bulkhead
// returned instead (a refusal, a panic, a detachment). An attempt with a
// deadline is decided by timedOutcome, which then stops the deadline's
// timer. A value Run returned that
// the caller will never get (a FAILURE's, a late success's) goes to
// Discard here, where the outcome that rules it out is decided, and is
// cleared: whatever comes next (a retry, a fallback, an error), no stage
// can hand it to the caller.
func (k *commandCall[T, C]) classify(runCtx context.Context, dl *deadline.Context, lat time.Duration, returned bool, err error) {
	if dl != nil {
		k.timedOutcome(dl, lat, returned, err)
	} else if returned && err == nil && runCtx.Err() == nil { // the common case, decided inline
		// k.r is still zero (only a refusing stage sets it, and then
		// classify does not run): its error needs no store.
		k.r.event, k.r.run, k.r.ran = metrics.Success, lat, true
	} else {
		k.r = k.g.outcome(runCtx, nil, lat, returned, err)
	}
	if k.r.ran && k.failed() {
		discard(k.g, &k.cmd, k.v)
		var zero T
		k.v = zero
	}
}

// timedOutcome is classify's decision for an attempt whose Run had the
// deadline dl (its context), left in k.r: a success is decided here, the
// rest by outcome. It then stops the deadline's timer: only now, since a
// context cancelled first would make a success read as CANCELLED. In a
// group on the system clock, whether Run returned before the deadline is
// judged at the attempt's end (k.now, read when the bulkhead returned; see
// deadlineOffset) instead of at a reading of the deadline's own.
func (k *call) timedOutcome(dl *deadline.Context, lat time.Duration, returned bool, err error) {
	live := false
	if returned && err == nil {
		if k.g.deadlineClock {
			live = dl.ErrAt(k.now+deadlineOffset) == nil
		} else {
			live = dl.Err() == nil
		}
	}
	if live {
		// k.r is still zero, as in classify.
		k.r.event, k.r.run, k.r.ran = metrics.Success, lat, true
	} else {
		k.r = k.g.outcome(dl, dl, lat, returned, err)
	}
	dl.Cancel()
}

// outcome is the primary outcome of an attempt that did not simply
// succeed: classify decides a success (Run returned no error, its context
// still live) inline, and hands the rest, what the bulkhead and Run
// returned, to outcome. A run context that had ended when Run
// returned makes even a success a TIMEOUT or CANCELLED. (classify keeps
// the success check inline: PERFORMANCE.md counts what folding it into
// outcome would cost.)
func (g *Group) outcome(runCtx context.Context, dl *deadline.Context, run time.Duration, returned bool, err error) result {
	switch {
	case returned && runCtx.Err() != nil: // Run returned after runCtx ended
		return result{event: ended(dl), err: lateErr(runCtx, err), run: run, ran: true}
	case returned && err == nil:
		return result{event: metrics.Success, run: run, ran: true}
	case returned:
		if g.isBadRequest(err) {
			return result{event: metrics.BadRequest, err: err, run: run, ran: true}
		}
		return result{event: metrics.Failure, err: err, run: run, ran: true}
	}
	// The bulkhead answered instead of Run.
	var pe *isolation.PanicError
	switch {
	case errors.As(err, &pe):
		return result{event: metrics.Failure, err: pe, run: run, ran: true}
	case errors.Is(err, isolation.ErrRejected), errors.Is(err, isolation.ErrClosed):
		return result{event: g.rejected, err: err}
	}
	// ErrDetached or ErrDropped: the run context ended first.
	e := ended(dl)
	if e == metrics.Timeout && errors.Is(err, isolation.ErrDropped) {
		e = metrics.QueueTimeout // our own queue was too slow, not the dependency
	}
	return result{event: e, err: err}
}

// isBadRequest reports whether Run's error err is the caller's fault: marked
// with BadRequest or so judged by the group's IsBadRequest, which, if it
// panics, judges no (the panic is logged).
func (g *Group) isBadRequest(err error) (bad bool) {
	if IsBadRequest(err) {
		return true
	}
	isBad := g.cfg().IsBadRequest
	if isBad == nil {
		return false
	}
	defer g.recoverHook("IsBadRequest")
	return isBad(err)
}

// lateErr is the cause of a call whose Run returned after runCtx ended:
// Run's error if it returned one, else the context's. Such a call is a
// TIMEOUT (or CANCELLED) whatever Run returned, so a bad-request mark on
// Run's error is hidden: the error does not also say IsBadRequest.
func lateErr(runCtx context.Context, runErr error) error {
	switch {
	case runErr == nil:
		return runCtx.Err()
	case IsBadRequest(runErr):
		return lateBadRequest{runErr}
	}
	return runErr
}

// lateBadRequest is a bad request that came too late: errors.Is and
// errors.As reach err and what it wraps, except the BadRequest mark.
type lateBadRequest struct{ err error }

func (l lateBadRequest) Error() string { return l.err.Error() }

func (l lateBadRequest) Is(target error) bool { return errors.Is(l.err, target) }

func (l lateBadRequest) As(target any) bool {
	if _, mark := target.(**badRequest); mark {
		return false
	}
	return errors.As(l.err, target)
}

// kindOf returns the sentinel an *Error of an attempt that ended as r
// matches. A rejection by a closed bulkhead (r.err matches
// isolation.ErrClosed: the group was closed) matches ErrClosed, not
// ErrRefused: a shutdown is not a full bulkhead.
func kindOf(ctx context.Context, r result) error {
	switch r.event {
	case metrics.Timeout, metrics.QueueTimeout:
		return ErrTimeout
	case metrics.ShortCircuited:
		return refusedBreaker
	case metrics.ThreadPoolRejected, metrics.SemaphoreRejected:
		if errors.Is(r.err, isolation.ErrClosed) {
			return ErrClosed
		}
		return refusedBulkhead
	case metrics.Cancelled:
		return ctx.Err()
	case metrics.RateLimited:
		return refusedLimit
	case metrics.ReadOnly:
		return refusedReadOnly
	case metrics.Throttled:
		return refusedThrottle
	case metrics.PriorityRejected:
		return refusedPriority
	}
	return nil
}
