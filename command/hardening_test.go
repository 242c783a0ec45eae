package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/internal/logtest"
	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
)

// Regression tests for the hardening issue: each names what broke.

// newLoggedGroup creates a group whose registry logs into the returned buffer.
func newLoggedGroup(t *testing.T, cfg GroupConfig) (*Group, *logtest.Buffer) {
	t.Helper()
	var buf logtest.Buffer
	reg := NewRegistry(RegistryConfig{Clock: new(metrics.ManualClock), Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("deps", cfg)
	require.NoError(t, err)
	return g, &buf
}

// valueCmd returns its value with its error, optionally after its deadline,
// and counts what Discard gets.
type valueCmd struct {
	v        int
	err      error
	late     bool // return only once ctx has ended
	discards *atomic.Int64
}

func (c valueCmd) Run(ctx context.Context) (int, error) {
	if c.late {
		<-ctx.Done()
		time.Sleep(time.Millisecond)
	}
	return c.v, c.err
}

func (c valueCmd) Discard(v int) {
	if v == c.v {
		c.discards.Add(1)
	}
}

// Item 1: every value Run produced that the caller does not get reaches
// Discard, whatever the error (a 4xx response judged TIMEOUT leaked its body).
func TestDiscardGetsEveryUndeliveredValue(t *testing.T) {
	errDep := errors.New("dependency error")
	for _, strategy := range []Strategy{Thread, Semaphore} {
		for _, tc := range []struct {
			name      string
			cmd       valueCmd
			event     metrics.Event
			delivered bool
		}{
			{"failure with a value", valueCmd{v: 7, err: errDep}, metrics.Failure, false},
			{"late bad request", valueCmd{v: 7, err: BadRequest(errDep), late: true}, metrics.Timeout, false},
			{"late failure", valueCmd{v: 7, err: errDep, late: true}, metrics.Timeout, false},
			{"late success", valueCmd{v: 7, late: true}, metrics.Timeout, false},
			{"bad request in time", valueCmd{v: 7, err: BadRequest(errDep)}, metrics.BadRequest, true},
			{"success", valueCmd{v: 7}, metrics.Success, true},
		} {
			t.Run(fmt.Sprintf("%v/%s", strategy, tc.name), func(t *testing.T) {
				// A late Run waits for the timeout, which must not end the
				// call before Run starts (QUEUE_TIMEOUT); one in time must
				// never meet it, however loaded the machine.
				timeout := 10 * time.Second
				if tc.cmd.late {
					timeout = lateTimeout
				}
				g, _ := newTestGroup(t, GroupConfig{Strategy: strategy, Timeout: timeout})
				cmd := tc.cmd
				cmd.discards = new(atomic.Int64)
				v, info, _ := ExecuteInfo(context.Background(), g, cmd)
				assert.Equal(t, tc.event, info.Event)
				want := int64(1)
				if tc.delivered {
					want = 0
					assert.Equal(t, 7, v)
				}
				// A detached Run (Thread) hands its value over when it returns.
				require.Eventually(t, func() bool { return cmd.discards.Load() == want }, 5*time.Second, time.Millisecond)
				assert.Equal(t, want, cmd.discards.Load(), "Discard calls")
				waitIdle(t, []*Group{g})
			})
		}
	}
}

// blockCmd blocks until release is closed, then does what end says.
type blockCmd struct {
	release chan struct{}
	end     string // "panic" or "goexit"
}

func (c blockCmd) Run(context.Context) (int, error) {
	<-c.release
	if c.end == "panic" {
		panic("detached Run panics")
	}
	runtime.Goexit()
	return 0, nil
}

// Item 5: a detached Run that panics or calls runtime.Goexit counts its
// detached call back (the command's Detached stayed up for ever).
func TestDetachedCountReturnsAfterPanicOrGoexit(t *testing.T) {
	for _, end := range []string{"panic", "goexit"} {
		t.Run(end, func(t *testing.T) {
			g, _ := newTestGroup(t, GroupConfig{Timeout: lateTimeout})
			cmd := blockCmd{release: make(chan struct{}), end: end}
			_, info, err := ExecuteInfo(context.Background(), g, cmd)
			require.ErrorIs(t, err, ErrTimeout)
			require.Equal(t, metrics.Timeout, info.Event)
			c := g.commands.Load().names.get("blockCmd")
			assert.Equal(t, int64(1), c.hot.detached.Load())
			close(cmd.release)
			require.Eventually(t, func() bool { return c.hot.detached.Load() == 0 }, 5*time.Second, time.Millisecond)
			waitIdle(t, []*Group{g})
			assert.Zero(t, g.Snapshot().Commands[0].Detached)
		})
	}
}

// hookCmd's Run fails with err; its Discard may panic.
type hookCmd struct {
	err          error
	panicDiscard bool
}

func (c hookCmd) Run(context.Context) (int, error) { return 1, c.err }

func (c hookCmd) Discard(int) {
	if c.panicDiscard {
		panic("Discard panics")
	}
}

var errClassifierPanics = errors.New("an error the classifier panics on")

// Item 6: a panicking IsBadRequest or Discard, after admission, neither
// escapes nor leaves the call in flight nor holds a half-open probe slot.
func TestPanickingHooksReleaseTheCall(t *testing.T) {
	for _, strategy := range []Strategy{Thread, Semaphore} {
		t.Run(strategy.String(), func(t *testing.T) {
			clock := new(metrics.ManualClock)
			var buf logtest.Buffer
			reg := NewRegistry(RegistryConfig{Clock: clock, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
			t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
			g, err := reg.NewGroup("deps", GroupConfig{Strategy: strategy,
				IsBadRequest: func(err error) bool {
					if errors.Is(err, errClassifierPanics) {
						panic("IsBadRequest panics")
					}
					return false
				},
				CommandBreaker: circuit.Config{MinRequests: 1, OpenDuration: time.Second, HalfOpenProbes: 1, HalfOpenSuccesses: 1}})
			require.NoError(t, err)

			_, info, err := ExecuteInfo(context.Background(), g, hookCmd{err: errClassifierPanics, panicDiscard: true})
			assert.Equal(t, metrics.Failure, info.Event, "a classifier that panics judges: not a bad request")
			assert.ErrorIs(t, err, errClassifierPanics)
			c := g.commands.Load().names.get("hookCmd")
			assert.Zero(t, c.hot.inFlight.Load())
			assert.Contains(t, buf.String(), "IsBadRequest panicked")
			assert.Contains(t, buf.String(), "Discard panicked")

			// The breaker is open now; once half-open, the probe's classifier
			// and Discard panic: the probe must still be recorded, its slot freed.
			b, _ := g.CommandBreaker("hookCmd")
			require.Equal(t, circuit.Open, b.State())
			clock.Advance(time.Second)
			_, info, _ = ExecuteInfo(context.Background(), g, hookCmd{err: errClassifierPanics, panicDiscard: true})
			require.Equal(t, metrics.Failure, info.Event, "the probe ran")
			assert.Equal(t, circuit.Open, b.State(), "the failed probe reopened the breaker")
			clock.Advance(2 * time.Second)
			_, info, err = ExecuteInfo(context.Background(), g, hookCmd{})
			assert.Equal(t, metrics.Success, info.Event, "the next probe was admitted: %v", err)
			assert.Equal(t, circuit.Closed, b.State())
			assert.Zero(t, c.hot.inFlight.Load())
		})
	}
}

// goexitCmd calls runtime.Goexit in Run.
type goexitCmd struct{}

func (goexitCmd) Run(context.Context) (int, error) {
	runtime.Goexit()
	return 0, nil
}

// Item 6: runtime.Goexit in a Semaphore-mode Run (on the caller's
// goroutine) never let Execute count the call or release it.
func TestGoexitInSemaphoreRunIsCounted(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, MaxConcurrent: 1})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = Execute(context.Background(), g, goexitCmd{})
		t.Error("Execute returned on a goroutine that Run ended")
	}()
	<-done
	c := g.commands.Load().names.get("goexitCmd")
	assert.Zero(t, c.hot.inFlight.Load())
	assert.Zero(t, g.sem.Stats().Active, "the permit is released")
	counts := c.metrics.Cumulative()
	assert.Equal(t, int64(1), counts[metrics.Failure])
	assert.Equal(t, int64(1), counts[metrics.ExceptionThrown])
	assert.Equal(t, int64(1), c.breaker.Snapshot().Health.Failures, "the breaker counted the failure")

	// In a Thread group the pool reports it: a FAILURE with a PanicError.
	pg, _ := newTestGroup(t, GroupConfig{})
	_, info, err := ExecuteInfo(context.Background(), pg, goexitCmd{})
	assert.Equal(t, metrics.Failure, info.Event)
	var pe *isolation.PanicError
	assert.ErrorAs(t, err, &pe)
}

// sleepCmd succeeds after d.
type sleepCmd struct{ d time.Duration }

func (c sleepCmd) Run(context.Context) (int, error) {
	time.Sleep(c.d)
	return 1, nil
}

// Item 9: calls that time out in the group's own queue (Run never started)
// were dependency TIMEOUTs that opened the breaker of a healthy dependency.
func TestQueueTimeoutIsNotTheDependencysFault(t *testing.T) {
	reg := NewRegistry(RegistryConfig{Logger: discardLogger})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	breaker := circuit.Config{MinRequests: 4, FailureRatio: 0.5}
	g, err := reg.NewGroup("deps", GroupConfig{MaxConcurrent: 2, QueueSize: 30, Timeout: 100 * time.Millisecond,
		Breaker: breaker, CommandBreaker: breaker})
	require.NoError(t, err)

	const calls = 32
	var wg sync.WaitGroup
	events := make([]metrics.Event, calls)
	errs := make([]error, calls)
	for i := range calls {
		wg.Go(func() {
			var info Info
			_, info, errs[i] = ExecuteInfo(context.Background(), g, sleepCmd{30 * time.Millisecond})
			events[i] = info.Event
		})
	}
	wg.Wait()
	var n metrics.Counts
	for i, e := range events {
		n[e]++
		if e == metrics.QueueTimeout {
			assert.ErrorIs(t, errs[i], ErrTimeout)
			assert.ErrorIs(t, errs[i], isolation.ErrDropped)
		}
	}
	assert.Positive(t, n[metrics.QueueTimeout], "calls timed out in the queue: %v", events)
	assert.Positive(t, n[metrics.Success])
	assert.Equal(t, int64(calls), n[metrics.Success]+n[metrics.QueueTimeout]+n[metrics.Timeout], "%v", events)
	h := g.breaker.Snapshot().Health
	assert.Equal(t, n[metrics.Success]+n[metrics.Timeout], h.Requests, "the breaker counts only calls whose Run started")
	if n[metrics.Timeout] == 0 {
		assert.Equal(t, circuit.Closed, g.breaker.State(), "a healthy dependency keeps its breaker closed")
	}
}

// Item 10: a Run that returns a bad request after the deadline was both a
// TIMEOUT (event) and a bad request (errors): it is a TIMEOUT.
func TestLateBadRequestIsATimeout(t *testing.T) {
	errDep := errors.New("no such user")
	for _, strategy := range []Strategy{Thread, Semaphore} {
		t.Run(strategy.String(), func(t *testing.T) {
			g, _ := newTestGroup(t, GroupConfig{Strategy: strategy, Timeout: lateTimeout})
			cmd := valueCmd{err: BadRequest(errDep), late: true, discards: new(atomic.Int64)}
			_, info, err := ExecuteInfo(context.Background(), g, cmd)
			assert.Equal(t, metrics.Timeout, info.Event)
			assert.ErrorIs(t, err, ErrTimeout)
			assert.False(t, IsBadRequest(err), "a TIMEOUT is not also a bad request: %v", err)
			if strategy == Semaphore { // Run's own error stays reachable
				assert.ErrorIs(t, err, errDep)
			}
			waitIdle(t, []*Group{g})
		})
	}
}

// Item 13: sizes above MaxInt32 passed Validate, then NewGroup failed with
// an isolation error naming neither the group nor the field.
func TestValidateRefusesSizesAboveMaxInt32(t *testing.T) {
	if math.MaxInt == math.MaxInt32 {
		t.Skip("int is 32 bits")
	}
	reg, _ := newTestRegistry(t)
	for field, cfg := range map[string]GroupConfig{
		"MaxConcurrent": {MaxConcurrent: math.MaxInt32 + 1},
		"QueueSize":     {QueueSize: math.MaxInt32 + 1},
		"FallbackLimit": {FallbackLimit: math.MaxInt32 + 1},
	} {
		assert.ErrorIs(t, cfg.Validate(), ErrInvalidConfig, field)
		_, err := reg.NewGroup("big", cfg)
		require.ErrorIs(t, err, ErrInvalidConfig, field)
		assert.Contains(t, err.Error(), field)
		assert.Contains(t, err.Error(), `"big"`)
	}
}

type ptrCmd struct{ n int }

func (c *ptrCmd) Run(context.Context) (int, error) { return c.n, nil }

// Item 14: nil arguments get a message that says what to do; a nil command
// is not counted as the dependency's FAILURE.
func TestNilArguments(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore})
	var nilCtx context.Context
	assert.PanicsWithValue(t, "command: Execute called with a nil context.Context; pass context.Background() or the request's context",
		func() { _, _ = Execute(nilCtx, g, &ptrCmd{}) })
	assert.PanicsWithValue(t, "command: Execute called with a nil *Group; create one with Registry.NewGroup",
		func() { _, _ = Execute(context.Background(), nil, &ptrCmd{}) })

	var nilPtr *ptrCmd
	_, info, err := ExecuteInfo(context.Background(), g, nilPtr)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "nil command (*command.ptrCmd)")
	assert.Equal(t, metrics.BadRequest, info.Event)

	var nilIface Runner[int]
	_, err = Execute(context.Background(), g, nilIface)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	var typedNil Runner[int] = nilPtr
	_, err = Execute(context.Background(), g, typedNil)
	assert.ErrorIs(t, err, ErrInvalidConfig)

	assert.Empty(t, g.Snapshot().Commands, "nothing counted: no FAILURE against the dependency")
	v, err := Execute(context.Background(), g, &ptrCmd{n: 3})
	assert.NoError(t, err)
	assert.Equal(t, 3, v)
}

// ptrFallback's Fallback has a pointer receiver: passed by value, it has none.
type ptrFallback struct{}

func (ptrFallback) Run(context.Context) (int, error)              { return 0, errors.New("down") }
func (*ptrFallback) Fallback(context.Context, error) (int, error) { return 1, nil }

// wrongFallback's Fallback returns the wrong type.
type wrongFallback struct{}

func (wrongFallback) Run(context.Context) (int, error)                { return 0, errors.New("down") }
func (wrongFallback) Fallback(context.Context, error) (string, error) { return "", nil }
func (wrongFallback) Discard(string)                                  {}

// Item 15: a Fallback with the wrong signature was silently ignored (and
// showed as FALLBACK_MISSING in production): warn once per type.
func TestHookSignatureMismatchWarnsOnce(t *testing.T) {
	g, buf := newLoggedGroup(t, GroupConfig{Strategy: Semaphore})
	for range 3 {
		_, info, _ := ExecuteInfo(context.Background(), g, ptrFallback{})
		assert.True(t, info.Events.Has(metrics.FallbackMissing))
		_, _ = Execute(context.Background(), g, wrongFallback{})
	}
	_, err := Execute(context.Background(), g, &ptrFallback{})
	assert.NoError(t, err, "passed by pointer, the fallback serves")
	logs := buf.String()
	assert.Equal(t, 1, strings.Count(logs, "Fallback has a pointer receiver, but the command is passed as command.ptrFallback"), logs)
	assert.Equal(t, 1, strings.Count(logs, "command.wrongFallback.Fallback does not have the signature Fallback(context.Context, error) (int, error)"), logs)
	assert.Equal(t, 1, strings.Count(logs, "command.wrongFallback.Discard does not have the signature Discard(int)"), logs)
	assert.NotContains(t, logs, "*command.ptrFallback", "a command passed by pointer is fine")
}

// Item 17: every distinct command name cost a breaker and a window for
// ever; past MaxCommands, new names run as the overflow command.
func TestMaxCommandsFoldsNewNames(t *testing.T) {
	g, buf := newLoggedGroup(t, GroupConfig{Strategy: Semaphore, MaxCommands: 3,
		Commands: map[string]CommandConfig{"declared": {Timeout: time.Second}}})
	for i := range 10 {
		_, err := Execute(context.Background(), g, sleepCmd{}, WithName(fmt.Sprintf("user-%d", i)))
		require.NoError(t, err)
	}
	var names []string
	for _, c := range g.Snapshot().Commands {
		names = append(names, c.Name)
	}
	assert.ElementsMatch(t, []string{"declared", "user-0", "user-1", overflowCommand}, names)
	over := g.commands.Load().names.get(overflowCommand)
	assert.Equal(t, int64(8), over.metrics.Cumulative()[metrics.Success], "the overflowed calls are counted")
	assert.Equal(t, 1, strings.Count(buf.String(), "new names run as "+overflowCommand), buf.String())
	_, err := Execute(context.Background(), g, sleepCmd{}, WithName("user-0"))
	assert.NoError(t, err)
	assert.Equal(t, int64(2), g.commands.Load().names.get("user-0").metrics.Cumulative()[metrics.Success], "known names keep their own command")

	reg, _ := newTestRegistry(t)
	_, err = reg.NewGroup("small", GroupConfig{MaxCommands: 1, Commands: map[string]CommandConfig{"a": {}, "b": {}}})
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "MaxCommands 1")
	_, err = reg.NewGroup("negative", GroupConfig{MaxCommands: -1})
	assert.ErrorIs(t, err, ErrInvalidConfig)
}
