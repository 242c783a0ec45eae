package faultinject

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// counted is a command that counts its runs and returns "ok".
type counted struct{ runs *atomic.Int64 }

func (c counted) Run(context.Context) (string, error) {
	c.runs.Add(1)
	return "ok", nil
}

// named names itself.
type named struct{ counted }

func (named) Name() string { return "custom-name" }

// withFallback degrades to "fallback".
type withFallback struct{ counted }

func (withFallback) Fallback(context.Context, error) (string, error) { return "fallback", nil }

// noFallback has a promoted Fallback that command.NoFallback silences.
type noFallback struct {
	withFallback
	command.NoFallback
}

// generic is a generic command type.
type generic[T any] struct{ v T }

func (g generic[T]) Run(context.Context) (T, error) { return g.v, nil }

// discarding returns a value with an error and records what it discards.
type discarding struct{ discarded *[]string }

func (discarding) Run(context.Context) (string, error) { return "leftover", errors.New("half done") }
func (d discarding) Discard(v string)                  { *d.discarded = append(*d.discarded, v) }

func TestCommandKeepsTheInnerName(t *testing.T) {
	g := newTestGroup(t, command.GroupConfig{})
	runs := new(atomic.Int64)
	f := newEnabled(t, Config{})
	check := func(inner command.Runner[string]) {
		t.Helper()
		_, want, err := command.ExecuteInfo(context.Background(), g, inner)
		require.NoError(t, err)
		_, got, err := command.ExecuteInfo(context.Background(), g, Command(inner, f))
		require.NoError(t, err)
		assert.Equal(t, want.Command, got.Command)
	}
	check(counted{runs})
	check(&counted{runs})
	check(named{counted{runs}})
	check(withFallback{counted{runs}})
	check(noFallback{withFallback: withFallback{counted{runs}}})
	check(generic[string]{"x"})
	check(&generic[string]{"x"})
	check(command.Func("func-name", counted{runs}.Run, nil))
	assert.Equal(t, "custom-name", Command[string](named{counted{runs}}, f).(command.Namer).Name())
	assert.Equal(t, "counted", Command[string](&counted{runs}, f).(command.Namer).Name())
}

func TestCommandKeepsTheInnerFallback(t *testing.T) {
	g := newTestGroup(t, command.GroupConfig{})
	f := newEnabled(t, Config{ErrorShare: 1})
	runs := new(atomic.Int64)
	ctx := context.Background()

	v, info, err := command.ExecuteInfo(ctx, g, Command[string](withFallback{counted{runs}}, f))
	require.NoError(t, err)
	assert.Equal(t, "fallback", v)
	assert.True(t, info.Degraded)
	assert.Equal(t, metrics.Failure, info.Event)

	for _, inner := range []command.Runner[string]{counted{runs}, noFallback{withFallback{counted{runs}}, command.NoFallback{}}} {
		v, info, err = command.ExecuteInfo(ctx, g, Command(inner, f))
		assert.Empty(t, v)
		assert.False(t, info.Degraded)
		assert.True(t, info.Events.Has(metrics.FallbackMissing), info.Events.String())
		assert.ErrorIs(t, err, command.ErrFallbackMissing)
		assert.ErrorIs(t, err, ErrInjected)
	}
	assert.Zero(t, runs.Load(), "an injected error never runs the command")

	// Called directly, the Fallback of a command without one declines.
	_, err = Command[string](counted{runs}, f).(command.Fallbacker[string]).Fallback(ctx, errors.New("x"))
	assert.ErrorIs(t, err, command.ErrFallbackMissing)
}

func TestCommandKeepsTheInnerDiscard(t *testing.T) {
	g := newTestGroup(t, command.GroupConfig{})
	var discarded []string
	_, err := command.Execute(context.Background(), g, Command[string](discarding{&discarded}, newEnabled(t, Config{})))
	require.Error(t, err)
	assert.Equal(t, []string{"leftover"}, discarded)
}

func TestCommandHangHonoursTheContext(t *testing.T) {
	runs := new(atomic.Int64)
	cmd := Command[string](counted{runs}, newEnabled(t, Config{HangShare: 1}))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := cmd.Run(ctx)
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(10 * time.Second):
		t.Fatal("the hang outlived its context")
	}

	// Under Execute the hang is a TIMEOUT at the group's deadline, which
	// must leave the pool time to start Run on a loaded machine (else the
	// call is a QUEUE_TIMEOUT).
	g := newTestGroup(t, command.GroupConfig{})
	_, info, err := command.ExecuteInfo(context.Background(), g, cmd, command.WithTimeout(500*time.Millisecond))
	require.ErrorIs(t, err, command.ErrTimeout)
	assert.Equal(t, metrics.Timeout, info.Event)
	assert.Zero(t, runs.Load())
}

func TestCommandLatencyDelaysAndHonoursTheContext(t *testing.T) {
	runs := new(atomic.Int64)
	cmd := Command[string](counted{runs}, newEnabled(t, Config{LatencyShare: 1, Latency: Fixed(20 * time.Millisecond)}))
	start := time.Now()
	v, err := cmd.Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "ok", v)
	assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
	assert.Equal(t, int64(1), runs.Load())

	cmd = Command[string](counted{runs}, newEnabled(t, Config{LatencyShare: 1, Latency: Fixed(time.Hour)}))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	_, err = cmd.Run(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int64(1), runs.Load(), "a delay cut short by the context never runs the command")
}

func TestCommandRuntimeSwitchAppliesToTheNextCall(t *testing.T) {
	runs := new(atomic.Int64)
	f, err := New(Config{ErrorShare: 1})
	require.NoError(t, err)
	cmd := Command[string](counted{runs}, f)
	ctx := context.Background()
	run := func() error {
		_, err := cmd.Run(ctx)
		return err
	}

	require.NoError(t, run(), "new Faults start disabled")
	f.Enable()
	require.ErrorIs(t, run(), ErrInjected)
	require.NoError(t, f.Set(Config{ErrorShare: 0}))
	require.NoError(t, run())
	require.NoError(t, f.Set(Config{ErrorShare: 1, Err: context.Canceled}))
	err = run()
	require.ErrorIs(t, err, ErrInjected)
	require.ErrorIs(t, err, context.Canceled)
	f.Disable()
	require.NoError(t, run())
	assert.Equal(t, int64(3), runs.Load())

	_, err = Command[string](counted{runs}, nil).Run(ctx) // a nil Faults injects nothing
	require.NoError(t, err)
}

func TestInjectedErrorsAreFailuresThatOpenTheBreaker(t *testing.T) {
	g := newTestGroup(t, command.GroupConfig{CommandBreaker: circuit.Config{MinRequests: 10, FailureRatio: 0.5}})
	runs := new(atomic.Int64)
	f := newEnabled(t, Config{Seed: 3, ErrorShare: 1})
	cmd := Command[string](counted{runs}, f)
	ctx := context.Background()

	for range 10 {
		_, info, err := command.ExecuteInfo(ctx, g, cmd)
		require.ErrorIs(t, err, ErrInjected)
		require.Equal(t, metrics.Failure, info.Event)
	}
	br, ok := g.CommandBreaker("counted")
	require.True(t, ok)
	assert.Equal(t, circuit.Open, br.State())
	_, info, err := command.ExecuteInfo(ctx, g, cmd)
	require.ErrorIs(t, err, command.ErrRefused)
	assert.Equal(t, metrics.ShortCircuited, info.Event)
	assert.Zero(t, runs.Load())
}

func TestCommandPassesTheTransportOnlyFaultsThrough(t *testing.T) {
	for _, cfg := range []Config{
		{ResetShare: 1}, {EOFShare: 1}, {ServerErrorShare: 1}, {DNSShare: 1},
		{PoolSize: 1, PoolHeld: 1}, {SlowBodyShare: 1, SlowBodyDelay: time.Hour},
	} {
		runs := new(atomic.Int64)
		got, err := Command[string](counted{runs}, newEnabled(t, cfg)).Run(context.Background())
		require.NoError(t, err, "%+v", cfg)
		assert.Equal(t, "ok", got)
		assert.Equal(t, int64(1), runs.Load())
	}
}
