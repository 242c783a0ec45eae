package command

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

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
	fb, ok := FallbackOf[T](cmd)
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
		k.events.Add(metrics.FallbackSuccess)
		k.degraded, k.degradation = true, k.g.degradationOf(cmd, ferr != nil)
		if k.degradation != 0 {
			k.events.Add(k.degradation)
		}
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

// Static is a fallback that serves a fixed value (an empty list, a default
// setting). Embed it in a command: its Fallback method is promoted. Serve
// an empty value only if callers can tell it from real data through
// Info.Degraded.
type Static[T any] struct {
	// Value is what Fallback returns.
	Value T
}

// Fallback returns s.Value.
func (s Static[T]) Fallback(context.Context, error) (T, error) { return s.Value, nil }

// NoFallback marks a command that must fail loudly rather than degrade: a
// payment or any write that must never "succeed" by fallback. Embed it:
// Execute then never calls a Fallback method, even one promoted from another
// embedded type, and the call ends with FALLBACK_MISSING and an error
// matching ErrFallbackMissing.
type NoFallback struct{}

func (NoFallback) noFallback() {}

// noFallbacker is implemented by the commands that embed NoFallback.
type noFallbacker interface{ noFallback() }

// Errors of LastGood's Fallback.
var (
	// ErrNoLastGood: no value was ever stored.
	ErrNoLastGood = errors.New("command: no last good value")
	// ErrStale: the last good value is older than the maximum age.
	ErrStale = errors.New("command: last good value too old")
)

// LastGood keeps the last value a command produced, with the time it was
// stored, and serves it as a fallback while it is no older than its maximum
// age. Embed a *LastGood[T] in a command and call Store from Run on success;
// the promoted Fallback does the rest. A LastGood is safe for concurrent
// use; Store costs one small allocation, Load none.
type LastGood[T any] struct {
	maxAge time.Duration
	clock  metrics.Clock
	last   atomic.Pointer[stamped[T]]
}

type stamped[T any] struct {
	v  T
	at time.Duration
}

// NewLastGood returns an empty LastGood whose values may serve as fallback
// for maxAge after they were stored. maxAge must be positive: staleness is
// always bounded (an error wrapping ErrInvalidConfig otherwise). A nil clock
// means metrics.SystemClock().
func NewLastGood[T any](maxAge time.Duration, clock metrics.Clock) (*LastGood[T], error) {
	if maxAge <= 0 {
		return nil, fmt.Errorf("%w: LastGood maxAge %v must be positive", ErrInvalidConfig, maxAge)
	}
	if clock == nil {
		clock = metrics.SystemClock()
	}
	return &LastGood[T]{maxAge: maxAge, clock: clock}, nil
}

// Store records v as the last good value, stamped now.
func (l *LastGood[T]) Store(v T) {
	l.last.Store(&stamped[T]{v: v, at: l.clock.Now()})
}

// Load returns the last good value and its age; ok is false if none was
// stored. It ignores the maximum age.
func (l *LastGood[T]) Load() (v T, age time.Duration, ok bool) {
	s := l.last.Load()
	if s == nil {
		return v, 0, false
	}
	return s.v, l.clock.Now() - s.at, true
}

// MaxAge returns the maximum age of a value Fallback serves.
func (l *LastGood[T]) MaxAge() time.Duration { return l.maxAge }

// lastGood makes a command that embeds l a lastGooder: a coalesced call
// that joins a flight may be answered with l's value (see coalesce).
func (l *LastGood[T]) lastGood() *LastGood[T] { return l }

// Fallback returns the last good value if it is at most MaxAge old. Otherwise
// it fails (FALLBACK_FAILURE) with an error matching ErrNoLastGood or ErrStale.
func (l *LastGood[T]) Fallback(context.Context, error) (T, error) {
	v, age, ok := l.Load()
	switch {
	case !ok:
		return v, ErrNoLastGood
	case age > l.maxAge:
		var zero T
		return zero, fmt.Errorf("%w: age %v, max %v", ErrStale, age, l.maxAge)
	}
	return v, nil
}
