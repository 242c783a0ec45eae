package command

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
)

// Errors that Execute's errors match with errors.Is. Each also matches the
// error of the layer it comes from, so callers may test either.
var (
	// ErrRefused: bulwark refused the call itself, before Run: a breaker
	// (SHORT_CIRCUITED; also matches circuit.ErrOpen), the bulkhead
	// (THREAD_POOL_REJECTED, SEMAPHORE_REJECTED, and PRIORITY_REJECTED
	// from priority shedding; all three also match isolation.ErrRejected),
	// a rate limiter (RATE_LIMITED; its own error, such as a
	// *ratelimit.LimitError, stays reachable and Error.RetryAfter says
	// when to come back), read-only mode (READ_ONLY) or the client-side
	// throttle (THROTTLED). Error.Event says which. The dependency never
	// saw the call, and the breakers do not count it. (The rejections of
	// a closed group's bulkhead match ErrClosed instead.)
	ErrRefused = errors.New("command: refused")
	// ErrTimeout: Run did not finish within the timeout (TIMEOUT), or did
	// not start within it (QUEUE_TIMEOUT). Also matches
	// context.DeadlineExceeded.
	ErrTimeout error = &kindError{"command: timeout", context.DeadlineExceeded, nil}
	// ErrFallbackRejected: a fallback was needed but the group's fallback
	// limit was reached.
	ErrFallbackRejected = errors.New("command: fallback rejected")
	// ErrFallbackMissing: a fallback was needed but the command has none
	// (or embeds NoFallback, or its Fallback declined).
	ErrFallbackMissing = errors.New("command: no fallback")
	// ErrDeferred is returned (or wrapped) by a Fallback that serves no
	// value but has durably deferred the call's work, such as a write
	// stored in a queue for replay: Execute then answers the caller with
	// the fallback's value and a nil error, records FALLBACK_SUCCESS and
	// sets Info.Degraded and, in Info.Events, DEGRADED_DEFERRED. A fallback
	// must return it only once the work is stored; a caller of a deferring
	// command uses ExecuteInfo to tell "accepted"
	// (Events.Has(metrics.DegradedDeferred)) from "done".
	ErrDeferred = errors.New("command: deferred")
	// ErrInvalidConfig is wrapped by every configuration error of this
	// package; the message names the field and the value.
	ErrInvalidConfig = errors.New("command: invalid config")
)

// The kinds of ErrRefused, one per refusal; each also matches the
// sentinel of the layer that refused, if any.
var (
	refusedBreaker  error = &kindError{"command: short-circuited", ErrRefused, circuit.ErrOpen}
	refusedBulkhead error = &kindError{"command: rejected", ErrRefused, isolation.ErrRejected}
	refusedLimit    error = &kindError{"command: rate limited", ErrRefused, nil}
	refusedReadOnly error = &kindError{"command: read-only", ErrRefused, nil}
	refusedThrottle error = &kindError{"command: throttled", ErrRefused, nil}
	refusedPriority error = &kindError{"command: shed by priority", ErrRefused, isolation.ErrRejected}
)

// kindError is a sentinel that also matches a more general one (kind) and
// the lower layer's sentinel (base), if any.
type kindError struct {
	msg        string
	kind, base error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() []error {
	if e.base == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.base}
}

// Error is the error Execute returns when a call produced no value: its
// primary outcome was FAILURE, TIMEOUT, QUEUE_TIMEOUT, SHORT_CIRCUITED,
// *_REJECTED, RATE_LIMITED, READ_ONLY, THROTTLED, PRIORITY_REJECTED or CANCELLED and no fallback value was served. (A BAD_REQUEST error is
// returned exactly as Run returned it.)
//
// errors.Is matches the outcome's sentinel (ErrTimeout; ErrRefused for
// SHORT_CIRCUITED, *_REJECTED, RATE_LIMITED, READ_ONLY, THROTTLED and
// PRIORITY_REJECTED, with the refusing layer's own sentinel, or ErrClosed
// for a closed group's rejection; the context's error for CANCELLED), the
// cause and the fallback's error; errors.As reaches Run's own error (or the
// *isolation.PanicError of a panic) through Err.
type Error struct {
	// Group and Command name the call.
	Group, Command string
	// Event is the primary outcome, as in Info.Event.
	Event metrics.Event
	// Err is the cause: Run's error (an *isolation.PanicError if it
	// panicked), the breaker's refusal, the bulkhead's error, or the
	// context's error.
	Err error
	// FallbackErr says why no fallback value was served: ErrFallbackMissing,
	// ErrFallbackRejected, or the fallback's own error. It is nil for
	// CANCELLED, which never falls back.
	FallbackErr error

	kind    error            // ErrTimeout, a kind of ErrRefused, ErrClosed, a context error, or nil
	refuser *circuit.Breaker // the breaker that refused a SHORT_CIRCUITED call
}

// RetryAfter returns, for a SHORT_CIRCUITED call, how long until the breaker
// that refused it lets a probe through: its remaining open time, read now;
// for a RATE_LIMITED call, the delay the limiter's error gave; for a
// FAILURE, the delay the dependency's error gave (such as the Retry-After
// of an httpguard 5xx response). Both come from the first error in Err's
// chain with a method RetryAfterDelay() time.Duration, as ratelimit's
// *LimitError and httpguard's 5xx errors have; a Run error with one sets
// the delay of a retry too (retry.Config.MaxRetryAfter). It returns 0 for other outcomes, for a breaker that is not simply
// open (half-open with its probes out, forced open, shedding during
// ramp-up) and for an error that gave none.
func (e *Error) RetryAfter() time.Duration {
	if e.Event == metrics.RateLimited || e.Event == metrics.Failure {
		return retryAfterOf(e.Err)
	}
	if e.refuser == nil {
		return 0
	}
	return e.refuser.Snapshot().RetryAfter
}

// Error returns a message naming the command, the outcome, the cause and
// the fallback's error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("command ")
	b.WriteString(e.Group)
	b.WriteByte('/')
	b.WriteString(e.Command)
	b.WriteString(": ")
	b.WriteString(e.Event.Label())
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.FallbackErr != nil {
		b.WriteString(" (fallback: ")
		b.WriteString(e.FallbackErr.Error())
		b.WriteByte(')')
	}
	return b.String()
}

// Unwrap returns the outcome's sentinel, the cause and the fallback's error,
// skipping those that are nil.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 3)
	for _, err := range [...]error{e.kind, e.Err, e.FallbackErr} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// retryAfterer is an error that knows when a call could be tried again
// (see Error.RetryAfter).
type retryAfterer interface {
	RetryAfterDelay() time.Duration
}

// retryAfterOf returns the delay of the first retryAfterer in err's chain,
// or 0.
func retryAfterOf(err error) time.Duration {
	var ra retryAfterer
	if errors.As(err, &ra) {
		return max(ra.RetryAfterDelay(), 0)
	}
	return 0
}

// badRequest marks an error as the caller's fault.
type badRequest struct{ err error }

func (b *badRequest) Error() string { return b.err.Error() }
func (b *badRequest) Unwrap() error { return b.err }

// BadRequest marks err as the caller's fault (invalid input, not found, ...):
// returned from Run, it makes the call a BAD_REQUEST, which is returned to
// the caller as is, never falls back and is not counted against the
// dependency's health. errors.Is and errors.As see through the mark to err.
// BadRequest(nil) returns nil.
func BadRequest(err error) error {
	if err == nil {
		return nil
	}
	return &badRequest{err}
}

// IsBadRequest reports whether err, or an error it wraps, was marked by
// BadRequest.
func IsBadRequest(err error) bool {
	var b *badRequest
	return errors.As(err, &b)
}
