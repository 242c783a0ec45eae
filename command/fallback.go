package command

import (
	"context"
	"errors"

	"github.com/bulwark-go/bulwark/internal/wrap"
	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
)

// fallback is the stage of a failed call after its last attempt: the
// caller gets the command's fallback's value, or an *Error. A fallback runs
// on FAILURE, TIMEOUT, QUEUE_TIMEOUT, a rejection, a short-circuit or a
// rate-limit refusal (fallsBack), under the group's fallback limit; a
// CANCELLED call (the caller has gone) gets the error alone. When a
// fallback ran, the call ends when it returned.
func (k *commandCall[T, C]) fallback() {
	e := &Error{Group: k.g.name, Command: k.c.name, Event: k.r.event, Err: k.r.err, kind: kindOf(k.ctx, k.r), refuser: k.refuser()}
	if !fallsBack(k.r.event) {
		k.err = e
		return
	}
	k.v, k.err = k.serveFallback(e)
	k.now = k.g.clock.Now()
}

// serveFallback serves the command's fallback for the failed call e, under
// the group's fallback limit, and adds the fallback event to the attempt's.
// Under the settings of a NoFallback group it serves none, as for a
// command without a fallback. It converts the command to an interface (an
// allocation for a command struct with fields), as discard does: both are
// off the successful path.
func (k *commandCall[T, C]) serveFallback(e *Error) (T, error) {
	var zero T
	cmd := any(k.cmd)
	fb, ok := wrap.Fallback[T](cmd)
	if !ok || k.cs.noFallback {
		k.events.Add(metrics.FallbackMissing)
		e.FallbackErr = ErrFallbackMissing
		return zero, e
	}
	var v T
	var ferr error
	// The closure holds the fallback and e, never k: the call stays on
	// Execute's stack.
	serr := k.g.fallback.Execute(k.ctx, func(ctx context.Context) { v, ferr = fb.Fallback(ctx, e) })
	switch {
	case serr == nil && (ferr == nil || errors.Is(ferr, ErrDeferred)):
		k.degrade(cmd, ferr != nil)
		return v, nil
	case errors.Is(serr, isolation.ErrRejected):
		k.events.Add(metrics.FallbackRejection)
		e.FallbackErr = ErrFallbackRejected
		return zero, e
	case serr != nil:
		ferr = serr // the fallback panicked, or ctx ended before it could start
	}
	if errors.Is(ferr, ErrFallbackMissing) {
		k.events.Add(metrics.FallbackMissing) // the fallback declined
	} else {
		k.events.Add(metrics.FallbackFailure)
	}
	out := *e // e was handed to the fallback: leave it as the fallback saw it
	out.FallbackErr = ferr
	return zero, &out
}

// NoFallback marks a command that must fail loudly rather than degrade: a
// payment or any write that must never "succeed" by fallback. Embed it:
// Execute then never calls a Fallback method, even one promoted from another
// embedded type, and the call ends with FALLBACK_MISSING and an error
// matching ErrFallbackMissing.
type NoFallback = wrap.NoFallback
