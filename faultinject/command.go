package faultinject

import (
	"context"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/internal/wrap"
)

// Command returns cmd with faults injected into its Run by f: latency
// (Config.LatencyShare), a hang until the context ends (HangShare) and an
// *Error (ErrorShare); the transport-only faults (reset, EOF, server
// error, DNS failure, slow body, pool) pass through. An injected hang or
// error never calls cmd's Run; a delay is followed by it unless the
// context ended first. T is the command's result type, inferred from cmd:
//
//	profile, err := command.Execute(ctx, profiles, faultinject.Command(getProfile{id}, faults))
//
// The command keeps what command.Execute sees of cmd: its name (cmd's Name
// method if it is a command.Namer, else its type name, as command names
// it), its Fallback and its Discard. A cmd without a Fallback, or one that
// embeds command.NoFallback, stays without one: the call ends
// FALLBACK_MISSING exactly as for cmd itself. Injected errors are ordinary
// Run errors for Execute: FAILURE (TIMEOUT for a hang past the deadline),
// counted by the breakers.
//
// With a nil or disabled f the command runs cmd unchanged, paying one
// atomic load; the name of a command that is not a command.Namer costs an
// allocation per Execute, as for command.Func.
func Command[T any](cmd command.Runner[T], f *Faults) command.Runner[T] {
	w := wrapped[T]{inner: cmd, faults: f}
	if n, ok := cmd.(command.Namer); ok {
		w.namer = n
	} else {
		w.name = wrap.Name(cmd)
	}
	if d, ok := cmd.(command.Discarder[T]); ok {
		w.discarder = d
	}
	fb, ok := wrap.Fallback[T](cmd)
	if !ok {
		return wrappedNoFallback[T]{wrapped: w}
	}
	w.fallbacker = fb
	return w
}

// wrapped is a command with faults injected into its Run.
type wrapped[T any] struct {
	inner      command.Runner[T]
	faults     *Faults
	namer      command.Namer // inner, if it names itself
	name       string        // inner's type name otherwise
	fallbacker command.Fallbacker[T]
	discarder  command.Discarder[T]
}

// wrappedNoFallback is a wrapped command whose inner command has no
// fallback: command.Execute never calls its Fallback.
type wrappedNoFallback[T any] struct {
	wrapped[T]
	command.NoFallback
}

// Name returns the inner command's name.
func (w wrapped[T]) Name() string {
	if w.namer != nil {
		return w.namer.Name()
	}
	return w.name
}

// Run injects the faults drawn for this call, then runs the inner command
// unless a fault ended the call.
func (w wrapped[T]) Run(ctx context.Context) (T, error) {
	d, ok := w.faults.decide()
	if !ok {
		return w.inner.Run(ctx)
	}
	var zero T
	if err := sleep(ctx, d.latency); err != nil {
		return zero, err
	}
	switch d.outcome {
	case hang:
		<-ctx.Done()
		return zero, ctx.Err()
	case fail:
		return zero, d.injectedError()
	}
	return w.inner.Run(ctx)
}

// Fallback calls the inner command's Fallback. Execute never calls it when
// the inner command has none; a direct call then declines with
// command.ErrFallbackMissing.
func (w wrapped[T]) Fallback(ctx context.Context, err error) (T, error) {
	if w.fallbacker == nil {
		var zero T
		return zero, command.ErrFallbackMissing
	}
	return w.fallbacker.Fallback(ctx, err)
}

// Discard hands v to the inner command's Discard, if it has one.
func (w wrapped[T]) Discard(v T) {
	if w.discarder != nil {
		w.discarder.Discard(v)
	}
}
