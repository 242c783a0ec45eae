package command

import "context"

// A CallHook follows the attempts of every call in a registry's groups
// (RegistryConfig.Hook), on the caller's goroutine: it is how a tracer
// sees calls (package github.com/bulwark-go/bulwark/otel/bulwarkotel
// reports them to OpenTelemetry spans). A registry without one pays a nil
// test per attempt for it. A hook must be safe for concurrent use; a panic
// in it is logged and goes no further (the call goes on, counted as
// without the hook).
type CallHook interface {
	// Begin is called as each attempt of a call begins, before the rate
	// limiters, with the call's context (the caller's for the first
	// attempt; for a retry, the one Begin returned for the attempt before)
	// and the call's group g and Info's Command and Attempts (this
	// attempt's number, 1 for the first). The context it returns becomes
	// the call's: the attempt's limiters, Run (whose context derives from
	// it), a retry's backoff and the fallback after the last attempt see
	// it, and End gets it. It must derive from ctx, keeping its deadline and cancellation
	// (a value added, a span started); a nil return keeps ctx.
	Begin(ctx context.Context, g *Group, in Info) context.Context
	// End is called as each attempt ends, with the context Begin returned
	// for it: for an attempt that is retried (in.Events holds
	// metrics.Retried, in.Event is its outcome, in.Degraded is false), then
	// once when the call ends, with the Info ExecuteInfo returns (after
	// the fallback). A call refused before its first attempt (a nil
	// command) has neither.
	End(ctx context.Context, g *Group, in Info)
}

// hookBegin begins the attempt under way in the group's hook h: the call's
// context becomes the one h returns.
func (k *call) hookBegin(h CallHook) {
	defer k.g.recoverHook("CallHook.Begin")
	in := Info{Command: k.c.name, Attempts: int(k.attempts)}
	if ctx := h.Begin(k.ctx, k.g, in); ctx != nil {
		k.ctx = ctx
	}
}

// hookEnd ends the attempt under way in the group's hook h, with what
// info tells of the call so far.
func (k *call) hookEnd(h CallHook) {
	defer k.g.recoverHook("CallHook.End")
	h.End(k.ctx, k.g, k.info())
}
