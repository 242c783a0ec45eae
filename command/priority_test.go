package command

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command/priority"
	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
)

// holder holds calls in a group's bulkhead until released: each held call's
// Run signals that it started, then waits for release.
type holder struct {
	started chan struct{}
	release chan struct{}
	done    chan error
}

func newHolder() *holder {
	return &holder{started: make(chan struct{}, 64), release: make(chan struct{}), done: make(chan error, 64)}
}

// hold starts n calls of g with options opts that stay in the bulkhead,
// and returns once their Runs have all started.
func (h *holder) hold(t *testing.T, g *Group, n int, opts ...Option) {
	t.Helper()
	for range n {
		go func() {
			_, err := Execute(context.Background(), g, op[int]{"held", func(context.Context) (int, error) {
				h.started <- struct{}{}
				<-h.release
				return 0, nil
			}}, opts...)
			h.done <- err
		}()
		receive(t, h.started, "a held call's start")
	}
}

// free releases every held call and waits for the n of them to return.
func (h *holder) free(t *testing.T, n int) {
	t.Helper()
	close(h.release)
	for range n {
		require.NoError(t, receive(t, h.done, "a held call's end"))
	}
}

// TestPriorityShedsLowerFirst: a bulkhead of 4 with reserves of 0, 1/4, 1/2
// and 3/4 lets P3 in while it holds nothing, P2 while it holds under 2, P1
// under 3 and P0 until it is full; a refused call is PRIORITY_REJECTED,
// falls back, never runs, and neither breaker counts it.
func TestPriorityShedsLowerFirst(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		g, _ := newTestGroup(t, GroupConfig{Strategy: s, MaxConcurrent: 4, Timeout: NoTimeout,
			Priority: priority.Config{Reserve: [numPriorities]float64{0, 0.25, 0.5, 0.75}}})
		h := newHolder()
		ceilings := [numPriorities]int{4, 3, 2, 1}
		ran := 0
		for held := range 4 {
			for p := priority.P0; p < numPriorities; p++ {
				cmd := opFB[int]{op[int]{"probe", func(context.Context) (int, error) { ran++; return 1, nil }},
					func(_ context.Context, err error) (int, error) { return -1, nil }}
				before := ran
				v, info, err := ExecuteInfo(context.Background(), g, cmd, WithPriority(p))
				require.NoError(t, err)
				if held < ceilings[p] {
					assert.Equal(t, 1, v, "%v with %d held: admitted", p, held)
					assert.Equal(t, metrics.Success, info.Event)
					continue
				}
				assert.Equal(t, -1, v, "%v with %d held: the fallback answers", p, held)
				assert.Equal(t, metrics.PriorityRejected, info.Event, "%v with %d held", p, held)
				assert.Equal(t, events(metrics.PriorityRejected, metrics.FallbackSuccess), info.Events)
				assert.True(t, info.Degraded)
				assert.Equal(t, before, ran, "Run never started")
			}
			h.hold(t, g, 1, WithPriority(priority.P0))
		}
		c := counts(t, g, "probe")
		assert.EqualValues(t, 0+1+2+3, c[metrics.PriorityRejected], "one refusal per priority above the ceiling")
		assert.EqualValues(t, 16-6, c[metrics.Success])
		snap := g.commands.Load().names.get("probe").breaker.Snapshot()
		assert.EqualValues(t, 10, snap.Health.Requests, "the breaker counts only the calls that ran")
		assert.Zero(t, g.Snapshot().Bulkhead.Rejected, "no call reached a full bulkhead")
		h.free(t, 4)
	})
}

// TestPriorityRejectedError: without a fallback, a shed call's error
// matches ErrRefused and isolation.ErrRejected, and
// its cause says how full the bulkhead was.
func TestPriorityRejectedError(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, MaxConcurrent: 2, Timeout: NoTimeout,
		Priority: priority.Config{Reserve: startReserve}})
	h := newHolder()
	h.hold(t, g, 1)
	_, info, err := ExecuteInfo(context.Background(), g, op[int]{"report", succeed(1)}, WithPriority(priority.P3))
	require.Error(t, err)
	assert.Equal(t, metrics.PriorityRejected, info.Event)
	assert.ErrorIs(t, err, ErrRefused)
	assert.ErrorIs(t, err, isolation.ErrRejected)
	assert.ErrorIs(t, err, ErrFallbackMissing)
	var pe *priorityError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, priorityError{level: priority.P3, held: 1, ceiling: 1, capacity: 2}, *pe)
	assert.Equal(t, "command deps/report: priority_rejected: command: P3 shed: the bulkhead holds 1 of 2 calls and P3 enters below 1 (fallback: command: no fallback)",
		err.Error())
	var ce *Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, metrics.PriorityRejected, ce.Event)
	h.free(t, 1)
}

// TestPriorityFromOptionAndDefault: WithPriority overrides
// priority.Config.Default, and the last one given counts.
func TestPriorityFromOptionAndDefault(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, MaxConcurrent: 2, Timeout: NoTimeout,
		Priority: priority.Config{Reserve: [numPriorities]float64{0, 0, 0, 0.5}, Default: priority.P3}})
	h := newHolder()
	h.hold(t, g, 1, WithPriority(priority.P0)) // P3 enters only while the bulkhead holds nothing
	for _, tc := range []struct {
		name string
		cmd  Runner[int]
		opts []Option
		want metrics.Event
	}{
		{"the default, P3", op[int]{"plain", succeed(1)}, nil, metrics.PriorityRejected},
		{"the option", op[int]{"plain", succeed(1)}, []Option{WithPriority(priority.P1)}, metrics.Success},
		{"the last option", op[int]{"plain", succeed(1)}, []Option{WithPriority(priority.P0), WithPriority(priority.P3)}, metrics.PriorityRejected},
	} {
		_, info, _ := ExecuteInfo(context.Background(), g, tc.cmd, tc.opts...)
		assert.Equal(t, tc.want, info.Event, tc.name)
	}
	_, info, err := ExecuteInfo(context.Background(), g, op[int]{"plain", succeed(1)}, WithPriority(numPriorities))
	assert.Equal(t, metrics.BadRequest, info.Event, "a priority above P3 is the caller's mistake")
	assert.ErrorIs(t, err, ErrInvalidConfig)
	h.free(t, 1)
}

// TestPriorityCountsQueuedCalls: in a Thread group the calls waiting in the
// queue count as held, against the pool size plus the queue size.
func TestPriorityCountsQueuedCalls(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{MaxConcurrent: 1, QueueSize: 3, Timeout: NoTimeout,
		Priority: priority.Config{Reserve: [numPriorities]float64{0, 0, 0, 0.5}}})
	h := newHolder()
	h.hold(t, g, 1) // running
	queued := make(chan error, 1)
	go func() { _, err := Execute(context.Background(), g, op[int]{"queued", succeed(1)}); queued <- err }()
	require.Eventually(t, func() bool { return g.pool.Stats().Queued == 1 }, 10*time.Second, time.Millisecond)
	_, info, _ := ExecuteInfo(context.Background(), g, op[int]{"report", succeed(1)}, WithPriority(priority.P3))
	assert.Equal(t, metrics.PriorityRejected, info.Event, "2 of 4 held: P3 enters below 2")
	h.free(t, 1)
	require.NoError(t, receive(t, queued, "the queued call's end"))
}

// TestPriorityNeverDegradeFailsLoudly: in a group of presetNeverDegrade, a
// P0 call that finds the bulkhead full gets an error, not its command's
// fallback, and so does a shed P3 call: nothing is ever degraded.
func TestPriorityNeverDegradeFailsLoudly(t *testing.T) {
	cfg, err := Preset(presetNeverDegrade)
	require.NoError(t, err)
	cfg.Strategy, cfg.MaxConcurrent, cfg.Timeout = Semaphore, 2, NoTimeout
	cfg.Priority = priority.Config{Reserve: startReserve}
	g, _ := newTestGroup(t, cfg)
	h := newHolder()
	h.hold(t, g, 1, WithPriority(priority.P0))
	pay := opFB[int]{op[int]{"pay", succeed(1)}, func(context.Context, error) (int, error) { return -1, nil }}

	_, info, err := ExecuteInfo(context.Background(), g, pay, WithPriority(priority.P3))
	assert.ErrorIs(t, err, ErrRefused)
	assert.Equal(t, metrics.PriorityRejected, info.Event)
	assert.False(t, info.Degraded)
	assert.Equal(t, events(metrics.PriorityRejected, metrics.FallbackMissing, metrics.ExceptionThrown), info.Events)

	h.hold(t, g, 1, WithPriority(priority.P0)) // full now
	v, info, err := ExecuteInfo(context.Background(), g, pay, WithPriority(priority.P0))
	assert.ErrorIs(t, err, isolation.ErrRejected)
	assert.Equal(t, metrics.SemaphoreRejected, info.Event)
	assert.False(t, info.Degraded, "a payment never succeeds by fallback")
	assert.Zero(t, v)
	h.free(t, 2)
}

// TestPriorityReconfigure: priority shedding turns on and off live.
func TestPriorityReconfigure(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, MaxConcurrent: 2, Timeout: NoTimeout})
	h := newHolder()
	h.hold(t, g, 1)
	report := op[int]{"report", succeed(1)}
	_, info, _ := ExecuteInfo(context.Background(), g, report, WithPriority(priority.P3))
	assert.Equal(t, metrics.Success, info.Event, "off: WithPriority is ignored")

	cfg := g.Config()
	cfg.Priority.Reserve = startReserve
	require.NoError(t, g.Reconfigure(cfg))
	_, info, _ = ExecuteInfo(context.Background(), g, report, WithPriority(priority.P3))
	assert.Equal(t, metrics.PriorityRejected, info.Event, "on")

	cfg.Priority = priority.Config{}
	require.NoError(t, g.Reconfigure(cfg))
	_, info, _ = ExecuteInfo(context.Background(), g, report, WithPriority(priority.P3))
	assert.Equal(t, metrics.Success, info.Event, "off again")
	h.free(t, 1)
}

func TestPriorityValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg  priority.Config
		want string
	}{
		{priority.Config{Default: 4}, "Priority.Default 4 must be P0..P3"},
		{priority.Config{Reserve: [numPriorities]float64{0.1, 0.2, 0.3, 0.4}}, "Priority.Reserve[0] 0.1 must be 0"},
		{priority.Config{Reserve: [numPriorities]float64{0, 0.5, 0.2, 0.6}}, "Priority.Reserve[2] 0.2 is less than Priority.Reserve[1] 0.5"},
		{priority.Config{Reserve: [numPriorities]float64{0, 0.1, 0.2, 1}}, "Priority.Reserve[3] 1 must be at least 0 and less than 1"},
		{priority.Config{Reserve: [numPriorities]float64{0, -0.1, 0, 0}}, "Priority.Reserve[1] -0.1 must be at least 0"},
	} {
		err := GroupConfig{Priority: tc.cfg}.Validate()
		require.Error(t, err, tc.want)
		assert.ErrorIs(t, err, ErrInvalidConfig)
		assert.Contains(t, err.Error(), tc.want)
	}
	assert.NoError(t, GroupConfig{Priority: priority.Config{Reserve: startReserve, Default: priority.P3}}.Validate())
}

func TestPriorityString(t *testing.T) {
	var got []string
	for p := range priority.Level(numPriorities + 1) {
		got = append(got, p.String())
	}
	assert.Equal(t, []string{"P0", "P1", "P2", "P3", "P?"}, got)
}

// TestConservationWithPriority: the chaos of TestConservationUnderChaos
// (whose calls carry random priorities) in groups that shed by priority:
// every count still agrees with what the callers saw, and the breakers
// count none of the shed calls.
func TestConservationWithPriority(t *testing.T) {
	groups := chaosRegistry(t, circuit.Config{Mode: circuit.ForcedClosed}, nil)
	for _, g := range groups {
		cfg := g.Config()
		cfg.Priority.Reserve = [numPriorities]float64{0, 0.25, 0.5, 0.75}
		require.NoError(t, g.Reconfigure(cfg))
	}
	const calls = chaosCalls / 16
	total, shed := chaosRefusals(t, groups, calls, metrics.PriorityRejected)
	assert.Positive(t, shed, "calls were shed")
	t.Logf("%d of %d calls shed", shed, total)
}

// ExampleWithPriority: a bulkhead of 4 that keeps half of itself for the
// calls more important than P3: with 2 calls in it, a report (P3) is shed
// while a checkout (P0) gets in.
func ExampleWithPriority() {
	reg := NewRegistry(RegistryConfig{})
	defer reg.Close(context.Background())
	g, err := reg.NewGroup("orders", GroupConfig{Strategy: Semaphore, MaxConcurrent: 4,
		Priority: priority.Config{Reserve: startReserve}})
	if err != nil {
		panic(err)
	}
	// Two slow calls hold half of the bulkhead.
	release, started := make(chan struct{}), make(chan struct{})
	for range 2 {
		go Execute(context.Background(), g, Func[int]("slow", func(context.Context) (int, error) {
			started <- struct{}{}
			<-release
			return 0, nil
		}, nil))
		<-started
	}
	report := Func[string]("report", func(context.Context) (string, error) { return "report", nil }, nil)
	checkout := Func[string]("checkout", func(context.Context) (string, error) { return "order placed", nil }, nil)

	_, err = Execute(context.Background(), g, report, WithPriority(priority.P3))
	var e *Error
	fmt.Println(errors.As(err, &e) && e.Event == metrics.PriorityRejected)
	v, err := Execute(context.Background(), g, checkout, WithPriority(priority.P0))
	fmt.Println(v, err)
	close(release)
	// Output:
	// true
	// order placed <nil>
}

// startReserve is the starting point priority.Config.Reserve's doc gives.
var startReserve = [4]float64{0, 0.1, 0.25, 0.5}
