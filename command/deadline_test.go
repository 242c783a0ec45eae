package command

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/deadline"
	"github.com/bulwark-go/bulwark/metrics"
)

// blockUntilDone is a Run that waits for its ctx and notes that it ran.
func blockUntilDone(ran *atomic.Bool) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		ran.Store(true)
		<-ctx.Done()
		return 0, ctx.Err()
	}
}

func fallbackValue(context.Context, error) (int, error) { return -1, nil }

func TestDeadlineReserveOffCallerDeadlineIsCancelled(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		g, _ := newTestGroup(t, GroupConfig{Strategy: s, Timeout: 10 * time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		var ran atomic.Bool
		_, info, err := ExecuteInfo(ctx, g, opFB[int]{op[int]{"get", blockUntilDone(&ran)}, fallbackValue})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, metrics.Cancelled, info.Event, "without a reserve the caller's deadline wins: no fallback")
		require.False(t, info.Degraded)
	})
}

func TestDeadlineReserveTimesOutInsideTheCallersBudget(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		g, _ := newTestGroup(t, GroupConfig{Strategy: s, Timeout: 10 * time.Second, DeadlineReserve: 300 * time.Millisecond})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var ran atomic.Bool
		v, info, err := ExecuteInfo(ctx, g, opFB[int]{op[int]{"get", blockUntilDone(&ran)}, fallbackValue})
		require.NoError(t, err)
		require.Equal(t, -1, v, "the fallback answered")
		require.Equal(t, metrics.Timeout, info.Event)
		require.True(t, info.Degraded)
		require.NoError(t, ctx.Err(), "answered inside the caller's budget")
		require.True(t, ran.Load())
		require.Less(t, info.Latency, 900*time.Millisecond)
	})
}

func TestDeadlineReserveLargerThanTimeLeftFallsBackAtOnce(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		g, _ := newTestGroup(t, GroupConfig{Strategy: s, DeadlineReserve: time.Minute})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var ran atomic.Bool
		v, info, err := ExecuteInfo(ctx, g, opFB[int]{op[int]{"get", blockUntilDone(&ran)}, fallbackValue})
		require.NoError(t, err)
		require.Equal(t, -1, v)
		require.Equal(t, metrics.QueueTimeout, info.Event, "no time left for Run: it never started")
		require.False(t, ran.Load())
		require.NoError(t, ctx.Err())
	})
}

func TestDeadlineReserveKeepsTheShorterGroupTimeout(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		g, _ := newTestGroup(t, GroupConfig{Strategy: s, Timeout: 2 * time.Second, DeadlineReserve: time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		var left time.Duration
		_, err := Execute(ctx, g, op[int]{"get", func(ctx context.Context) (int, error) {
			dl, ok := ctx.Deadline()
			require.True(t, ok)
			left = time.Until(dl)
			return 1, nil
		}})
		require.NoError(t, err)
		require.LessOrEqual(t, left, 2*time.Second, "the group timeout is the shorter")
		require.Greater(t, left, time.Second)
	})
}

func TestDeadlineReserveWithoutCallerDeadlineKeepsTheTimeout(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, Timeout: NoTimeout, DeadlineReserve: time.Second})
	_, err := Execute(context.Background(), g, op[int]{"get", func(ctx context.Context) (int, error) {
		_, ok := ctx.Deadline()
		require.False(t, ok, "no caller deadline, no timeout: no deadline at all")
		return 1, nil
	}})
	require.NoError(t, err)
}

func TestDeadlineReserveNegativeIsAnError(t *testing.T) {
	err := GroupConfig{DeadlineReserve: -time.Millisecond}.Validate()
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorContains(t, err, "DeadlineReserve -1ms")
}

// The reserve is part of each command's settings: a Reconfigure that sets
// or clears it applies to a command that already ran, on either strategy,
// also with NoTimeout.
func TestDeadlineReserveChangesLive(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		cfg := GroupConfig{Strategy: s, Timeout: NoTimeout}
		g, _ := newTestGroup(t, cfg)
		cmd := opFB[int]{op[int]{"get", func(context.Context) (int, error) { return 1, nil }}, fallbackValue}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		v, err := Execute(ctx, g, cmd)
		require.NoError(t, err)
		require.Equal(t, 1, v)

		cfg.DeadlineReserve = time.Minute
		require.NoError(t, g.Reconfigure(cfg))
		v, info, err := ExecuteInfo(ctx, g, cmd)
		require.NoError(t, err)
		require.Equal(t, -1, v, "the reserve leaves no time for Run: the fallback answered")
		require.Equal(t, metrics.QueueTimeout, info.Event)

		cfg.DeadlineReserve = 0
		require.NoError(t, g.Reconfigure(cfg))
		v, info, err = ExecuteInfo(ctx, g, cmd)
		require.NoError(t, err)
		require.Equal(t, 1, v)
		require.Equal(t, metrics.Success, info.Event)
	})
}

// A group on the system clock hands its calls' deadlines the readings the
// call makes anyway (deadlineOffset; the other tests run on a manual clock,
// where each deadline reads the clock itself): the timeout counts from the
// call's start, a success is judged at the attempt's end, and a spent
// budget still keeps Run from starting.
func TestTimeoutOnTheSystemClock(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		reg := NewRegistry(RegistryConfig{Logger: discardLogger})
		t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
		g, err := reg.NewGroup("deps", GroupConfig{Strategy: s, Timeout: lateTimeout, DeadlineReserve: time.Minute})
		require.NoError(t, err)
		require.True(t, g.deadlineClock)

		var deadline time.Time
		before := time.Now()
		v, info, err := ExecuteInfo(context.Background(), g, op[int]{"get", func(ctx context.Context) (int, error) {
			deadline, _ = ctx.Deadline()
			return 1, nil
		}})
		after := time.Now()
		require.NoError(t, err)
		require.Equal(t, 1, v)
		require.Equal(t, metrics.Success, info.Event)
		require.False(t, deadline.Before(before.Add(lateTimeout)), "deadline %v: counts from before the call", deadline)
		require.False(t, deadline.After(after.Add(lateTimeout)), "deadline %v: counts from after the call", deadline)

		if s == Semaphore { // on a pool the caller leaves at the deadline: TIMEOUT, detached
			v, info, err = ExecuteInfo(context.Background(), g, op[int]{"get", func(context.Context) (int, error) {
				time.Sleep(lateTimeout + 50*time.Millisecond) // ignores its context
				return 1, nil
			}})
			require.ErrorIs(t, err, ErrTimeout)
			require.Zero(t, v)
			require.Equal(t, metrics.Timeout, info.Event, "a success returned after the deadline")
		}

		var ran atomic.Bool
		v, info, err = ExecuteInfo(context.Background(), g, opFB[int]{op[int]{"get", blockUntilDone(&ran)}, fallbackValue})
		require.NoError(t, err)
		require.Equal(t, -1, v)
		require.Equal(t, metrics.Timeout, info.Event, "Run waited for its context")
		require.True(t, ran.Load())

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // inside the reserve
		defer cancel()
		ran.Store(false)
		v, info, err = ExecuteInfo(ctx, g, opFB[int]{op[int]{"get", blockUntilDone(&ran)}, fallbackValue})
		require.NoError(t, err)
		require.Equal(t, -1, v)
		require.Equal(t, metrics.QueueTimeout, info.Event, "no time left for Run: it never started")
		require.False(t, ran.Load())
	})
}

// deadlineOffset turns a system clock reading into a deadline.Now reading
// that is never early (not before a deadline reading taken first) and late
// by little: the least of a few tries, so that a descheduled test does not
// fail it.
func TestDeadlineOffsetIsNeverEarly(t *testing.T) {
	least := time.Duration(math.MaxInt64)
	for range 100 {
		before := deadline.Now()
		turned := metrics.SystemClock().Now() + deadlineOffset
		require.GreaterOrEqual(t, turned, before, "a turned reading is early")
		least = min(least, turned-before)
	}
	require.Less(t, least, 100*time.Microsecond, "a turned reading is late by more than two readings take")
}
