package command

import (
	"context"
	"log/slog"
	"reflect"
	"runtime/debug"
)

// Execute runs cmd in group g and returns Run's value, a fallback's value,
// or an error. T is the command's result type and C the command's own type,
// both inferred: command.Execute(ctx, g, getProfile{id: 7}).
//
// The steps: the rate limiters, if any (the group's, then the command's),
// must admit the call, else RATE_LIMITED; the client-side throttle, if on,
// must admit it, else THROTTLED; both breakers (the group's, then
// the command's) must admit it, else SHORT_CIRCUITED; the bulkhead must
// admit it, else THREAD_POOL_REJECTED or SEMAPHORE_REJECTED; Run runs on a
// pool worker (Thread) or on the caller's goroutine (Semaphore) with the
// timeout in its ctx; the outcome (SUCCESS, FAILURE, TIMEOUT, QUEUE_TIMEOUT,
// BAD_REQUEST or CANCELLED) is recorded in the command's metrics and in both
// breakers; on FAILURE, TIMEOUT, QUEUE_TIMEOUT, a rejection, a short-circuit
// or a rate-limit or throttle refusal the command's Fallback, if any, runs under the
// group's fallback limit.
//
// In a group with retries (GroupConfig.Retry), a FAILURE or TIMEOUT of an
// Idempotent command is tried again, each attempt through all the steps
// above, before the fallback; see package retry.
//
// The error is an *Error, except for a BAD_REQUEST, whose error is returned
// exactly as Run returned it (with Run's value). Use ExecuteInfo to learn
// whether a value came from a fallback.
func Execute[T any, C Runner[T]](ctx context.Context, g *Group, cmd C, opts ...Option) (T, error) {
	k := commandCall[T, C]{call: call{ctx: ctx, g: g}, cmd: cmd}
	return k.execute(opts)
}

// ExecuteInfo is Execute that also tells what happened: the primary
// outcome, every event emitted, whether the value is a fallback's
// (Info.Degraded) and the latencies.
func ExecuteInfo[T any, C Runner[T]](ctx context.Context, g *Group, cmd C, opts ...Option) (T, Info, error) {
	k := commandCall[T, C]{call: call{ctx: ctx, g: g}, cmd: cmd}
	v, err := k.execute(opts)
	return v, k.info(), err
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
