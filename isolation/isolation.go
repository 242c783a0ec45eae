package isolation

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// Errors returned by the bulkheads. Refusals are preallocated: returning one costs nothing.
var (
	// ErrRejected reports a full bulkhead: every worker busy and the queue full (Pool), or every
	// permit taken (Semaphore). The work did not run.
	ErrRejected = errors.New("isolation: bulkhead full")

	// ErrClosed reports a call to a closed bulkhead. The work did not run.
	ErrClosed = errors.New("isolation: closed")

	// ErrInvalidConfig is wrapped by every configuration error; the message names the field
	// and the value.
	ErrInvalidConfig = errors.New("isolation: invalid config")

	// ErrDetached reports that the caller's context ended while its work was running (Pool
	// only). The caller was released at once; the work goes on in its worker with the ended
	// context and keeps its slot until it returns. Its result is dropped.
	// The error also matches the context's error (context.DeadlineExceeded or
	// context.Canceled).
	ErrDetached = errors.New("isolation: detached, work still running")

	// ErrDropped reports that the caller's context ended before the work started (for
	// instance while it waited in the Pool's queue), or that Close dropped a queued call. The
	// work never ran. The error also matches the context's error, or ErrClosed.
	ErrDropped = errors.New("isolation: dropped, work never ran")
)

// Preallocated combinations, so that a timeout costs no allocation.
var (
	errDetachedDeadline = newEndError(ErrDetached, context.DeadlineExceeded)
	errDetachedCanceled = newEndError(ErrDetached, context.Canceled)
	errDroppedDeadline  = newEndError(ErrDropped, context.DeadlineExceeded)
	errDroppedCanceled  = newEndError(ErrDropped, context.Canceled)
	errDroppedClosed    = newEndError(ErrDropped, ErrClosed)
)

// endError says how a call ended early (kind: ErrDetached or ErrDropped) and why (cause: the
// context's error or ErrClosed). errors.Is matches both.
type endError struct {
	msg  string
	errs []error
}

func newEndError(kind, cause error) *endError {
	return &endError{msg: kind.Error() + ": " + cause.Error(), errs: []error{kind, cause}}
}

func (e *endError) Error() string   { return e.msg }
func (e *endError) Unwrap() []error { return e.errs }

// detached returns the error for a caller that left while its work runs; cause is ctx.Err().
func detached(cause error) error {
	switch cause {
	case context.DeadlineExceeded:
		return errDetachedDeadline
	case context.Canceled:
		return errDetachedCanceled
	}
	return newEndError(ErrDetached, cause)
}

// dropped returns the error for work that never ran because its context ended; cause is
// ctx.Err().
func dropped(cause error) error {
	switch cause {
	case context.DeadlineExceeded:
		return errDroppedDeadline
	case context.Canceled:
		return errDroppedCanceled
	}
	return newEndError(ErrDropped, cause)
}

// PanicError is returned when work panicked (or called runtime.Goexit). The bulkhead recovered
// and keeps working.
type PanicError struct {
	// Value is the value passed to panic.
	Value any
	// Stack is the panicking goroutine's stack, taken where the panic was recovered.
	Stack []byte
}

// NewPanicError returns the PanicError of v, a value just recovered, with the stack of the
// goroutine that panicked: call it in the deferred function that recovered v.
func NewPanicError(v any) *PanicError {
	return &PanicError{Value: v, Stack: debug.Stack()}
}

// Error returns "isolation: work panicked: " and the panic value.
func (e *PanicError) Error() string {
	return fmt.Sprintf("isolation: work panicked: %v", e.Value)
}

// Unwrap returns the panic value if it is an error, so that errors.Is and errors.As see it.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// goexitValue is the PanicError value for work that called runtime.Goexit.
const goexitValue = "runtime.Goexit called in work"

// CloseError is returned by Close when its context ended before every call finished. It
// says what was cut off. errors.Is matches the context's error.
type CloseError struct {
	// Dropped is the number of queued calls that were dropped without running; their callers
	// got an error matching ErrDropped and ErrClosed.
	Dropped int
	// Running is the number of calls still running; they finish on their own, and each one
	// keeps its goroutine until its work returns.
	Running int
	// Err is the context's error.
	Err error
}

// Error says how many queued calls were dropped and how many were still running.
func (e *CloseError) Error() string {
	return fmt.Sprintf("isolation: close cut off: %d queued calls dropped, %d calls still running: %v",
		e.Dropped, e.Running, e.Err)
}

// Unwrap returns the context's error.
func (e *CloseError) Unwrap() error { return e.Err }

// Bulkhead bounds how many calls run at once. Pool and Semaphore implement it. Implementations
// are safe for concurrent use.
type Bulkhead interface {
	// Execute runs work(ctx) if the bulkhead admits it, and returns nil when work returned,
	// a *PanicError when it panicked, or an error matching ErrRejected, ErrClosed,
	// ErrDropped or ErrDetached when work did not run or its result was dropped.
	Execute(ctx context.Context, work func(ctx context.Context)) error
	// Stats returns the bulkhead's live gauges and counters.
	Stats() Stats
	// Close stops admitting calls and waits, until ctx ends, for admitted ones to finish.
	Close(ctx context.Context) error
}

var (
	_ Bulkhead = (*Pool)(nil)
	_ Bulkhead = (*Semaphore)(nil)
)

// Stats is a point-in-time view of a bulkhead. Each field is read atomically, the set is not:
// under load the fields may be a few calls apart.
type Stats struct {
	// Capacity is the number of calls that may run at once (Pool size, Semaphore max).
	Capacity int
	// QueueCapacity is the number of calls that may wait for a worker (0 for a Semaphore).
	QueueCapacity int
	// Active is the number of slots or permits taken. A Pool worker keeps its slot while it
	// moves from one queued call to the next, and a detached call keeps its slot until its
	// work returns.
	Active int
	// Queued is the number of calls waiting in the queue.
	Queued int
	// Detached is the number of calls still running whose caller already left (ErrDetached).
	Detached int
	// LargestActive is the highest Active seen since the bulkhead was created.
	LargestActive int
	// Completed counts work that returned (normally, by panic, or detached), or, for a
	// Semaphore, permits released.
	Completed int64
	// Rejected counts calls refused because the bulkhead was full.
	Rejected int64
}

// pollUntil checks done at once and then every millisecond until it reports
// true (nil) or ctx ends (ctx.Err()). Close uses it: closing is rare, and
// waking the last worker or permit holder would cost every call a check.
func pollUntil(ctx context.Context, done func() bool) error {
	if done() {
		return nil
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if done() {
				return nil
			}
		}
	}
}
