package command

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/metrics"
)

// hookKey is the context key of recorder's values.
type hookKey struct{}

// recorder is a CallHook that records what it sees: Begin adds the
// attempt's number to the context, End records the context's value with
// the Info. panicIn names a method that panics after recording.
type recorder struct {
	mu      sync.Mutex
	begins  []Info
	ends    []Info
	endCtx  []any
	panicIn string
}

func (r *recorder) Begin(ctx context.Context, g *Group, in Info) context.Context {
	r.mu.Lock()
	r.begins = append(r.begins, in)
	r.mu.Unlock()
	if r.panicIn == "Begin" {
		panic("Begin panics")
	}
	return context.WithValue(ctx, hookKey{}, in.Attempts)
}

func (r *recorder) End(ctx context.Context, g *Group, in Info) {
	r.mu.Lock()
	r.ends = append(r.ends, in)
	r.endCtx = append(r.endCtx, ctx.Value(hookKey{}))
	r.mu.Unlock()
	if r.panicIn == "End" {
		panic("End panics")
	}
}

// hookGroup returns a group of a registry whose hook is h.
func hookGroup(t *testing.T, h CallHook, cfg GroupConfig) *Group {
	t.Helper()
	reg := NewRegistry(RegistryConfig{Clock: new(metrics.ManualClock), Logger: discardLogger, Hook: h})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("deps", cfg)
	require.NoError(t, err)
	return g
}

func TestCallHookSeesEachAttempt(t *testing.T) {
	h := &recorder{}
	reg := NewRegistry(RegistryConfig{Clock: new(metrics.ManualClock), Logger: discardLogger, Hook: h})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	clock := new(metrics.ManualClock)
	sl := &sleeper{clock: clock}
	g, err := reg.NewGroup("deps", GroupConfig{Strategy: Semaphore, Retry: retry.Config{MaxAttempts: 3, NoBudget: true, Sleep: sl.sleep}})
	require.NoError(t, err)

	var runs atomic.Int64
	var seen []any
	cmd := retryOp{name: "get", idem: true, run: func(ctx context.Context) (int, error) {
		seen = append(seen, ctx.Value(hookKey{}))
		return failing(2, errors.New("down"), &runs)(ctx)
	}}
	v, info, err := ExecuteInfo(context.Background(), g, cmd)
	require.NoError(t, err)
	assert.Equal(t, 1, v)
	assert.Equal(t, 3, info.Attempts)
	assert.Equal(t, []any{1, 2, 3}, seen, "Run's context derives from the one Begin returned for its attempt")

	require.Len(t, h.begins, 3)
	for i, in := range h.begins {
		assert.Equal(t, Info{Command: "get", Attempts: i + 1}, in)
	}
	require.Len(t, h.ends, 3)
	for i, in := range h.ends[:2] {
		assert.Equal(t, metrics.Failure, in.Event)
		assert.True(t, in.Events.Has(metrics.Retried), "attempt %d is retried", i+1)
		assert.Equal(t, i+1, in.Attempts)
	}
	assert.Equal(t, info, h.ends[2], "the last End gets what ExecuteInfo returns")
	assert.Equal(t, []any{1, 2, 3}, h.endCtx, "End gets the context Begin returned for the attempt")
}

func TestCallHookFallbackAndRefusals(t *testing.T) {
	h := &recorder{}
	g := hookGroup(t, h, GroupConfig{Strategy: Semaphore})
	var fbCtx any
	_, info, err := ExecuteInfo(context.Background(), g, opFB[int]{
		op: op[int]{"get", func(context.Context) (int, error) { return 0, errors.New("down") }},
		fb: func(ctx context.Context, _ error) (int, error) { fbCtx = ctx.Value(hookKey{}); return 7, nil },
	})
	require.NoError(t, err)
	assert.True(t, info.Degraded)
	assert.Equal(t, 1, fbCtx, "the fallback runs with the last attempt's context")
	require.Len(t, h.ends, 1)
	assert.Equal(t, info, h.ends[0])

	_, err = Execute(context.Background(), g, op[int]{"get", succeed(1)})
	require.NoError(t, err)
	var nilCmd *op[int]
	_, err = Execute[int](context.Background(), g, nilCmd)
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Len(t, h.begins, 2, "a nil command is refused before any attempt: no Begin")
	assert.Len(t, h.ends, 2)
}

// TestCallHookPanics: a hook that panics is logged, and the call goes on
// and is counted as without it.
func TestCallHookPanics(t *testing.T) {
	for _, in := range []string{"Begin", "End"} {
		t.Run(in, func(t *testing.T) {
			h := &recorder{panicIn: in}
			g := hookGroup(t, h, GroupConfig{Strategy: Semaphore})
			var ctxVal any = "unset"
			v, err := Execute(context.Background(), g, op[int]{"get", func(ctx context.Context) (int, error) {
				ctxVal = ctx.Value(hookKey{})
				return 1, nil
			}})
			require.NoError(t, err)
			assert.Equal(t, 1, v)
			if in == "Begin" {
				assert.Nil(t, ctxVal, "a Begin that panics keeps the call's context")
			}
			s := g.Snapshot()
			require.Len(t, s.Commands, 1)
			assert.EqualValues(t, 1, s.Commands[0].Metrics.Cumulative[metrics.Success])
			assert.Zero(t, s.Commands[0].InFlight)
		})
	}
}

// nilCtxHook is a CallHook whose Begin returns nil.
type nilCtxHook struct{}

func (nilCtxHook) Begin(context.Context, *Group, Info) context.Context { return nil }
func (nilCtxHook) End(context.Context, *Group, Info)                   {}

func TestCallHookNilContextKeepsTheCallers(t *testing.T) {
	g := hookGroup(t, nilCtxHook{}, GroupConfig{Strategy: Semaphore})
	ctx := context.WithValue(context.Background(), hookKey{}, "caller")
	var got any
	_, err := Execute(ctx, g, op[int]{"get", func(ctx context.Context) (int, error) { got = ctx.Value(hookKey{}); return 1, nil }})
	require.NoError(t, err)
	assert.Equal(t, "caller", got)
}
