package command

import "context"

// FuncCommand is a command made of functions, for a one-off call site that
// does not deserve a named command type; build it with Func. T is the
// result type.
type FuncCommand[T any] struct {
	name     string
	run      func(context.Context) (T, error)
	fallback func(context.Context, error) (T, error)
}

// Func returns a command named name whose Run is run and whose Fallback is
// fallback (nil: no fallback, the call ends FALLBACK_MISSING when it would
// fall back). Calls with the same name share a breaker and metrics, as for
// any command. Its name is read through the Namer interface, which costs an
// allocation per call (see PERFORMANCE.md).
//
//	user, err := command.Execute(ctx, users, command.Func("getUser",
//		func(ctx context.Context) (User, error) { return db.User(ctx, id) },
//		func(ctx context.Context, err error) (User, error) { return Guest, nil }))
func Func[T any](name string, run func(context.Context) (T, error), fallback func(context.Context, error) (T, error)) FuncCommand[T] {
	return FuncCommand[T]{name: name, run: run, fallback: fallback}
}

// Name returns the name given to Func.
func (f FuncCommand[T]) Name() string { return f.name }

// Run calls the run function given to Func.
func (f FuncCommand[T]) Run(ctx context.Context) (T, error) { return f.run(ctx) }

// Fallback calls the fallback function given to Func, or declines with
// ErrFallbackMissing when it was nil.
func (f FuncCommand[T]) Fallback(ctx context.Context, err error) (T, error) {
	if f.fallback == nil {
		var zero T
		return zero, ErrFallbackMissing
	}
	return f.fallback(ctx, err)
}
