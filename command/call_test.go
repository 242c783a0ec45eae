package command

import (
	"context"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/internal/breaker"
	"github.com/bulwark-go/bulwark/internal/deadline"
	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
)

// The tests here drive the pipeline's stages one at a time, on a call
// opened by begin, as execute would; each ends the call with finish so that
// the books balance.

// openCall opens a call of cmd in g, as Execute does before its stages.
func openCall[C Runner[int]](t *testing.T, g *Group, cmd C, opts ...Option) *commandCall[int, C] {
	t.Helper()
	k := &commandCall[int, C]{call: call{ctx: context.Background(), g: g}, cmd: cmd}
	require.True(t, k.begin(opts))
	return k
}

// TestCallFitsTheUnrolledZeroing: Execute zeroes its call on every call,
// without a loop only below 192 bytes (the amd64 compiler's bound for
// unrolled zeroing, cmd/compile's AMD64.rules); a loop costs about 20
// instructions more (scripts/callpath.sh). A field that takes a call of a
// word-sized result past it must pay for itself elsewhere.
func TestCallFitsTheUnrolledZeroing(t *testing.T) {
	size := unsafe.Sizeof(commandCall[int, benchCmd]{})
	assert.Less(t, size, uintptr(192), "commandCall[int, struct{}] is %d bytes", size)
}

func TestLimitStage(t *testing.T) {
	t.Run("a refusing limiter: RATE_LIMITED, before the breakers", func(t *testing.T) {
		g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, RateLimit: refusing{}})
		k := openCall(t, g, op[int]{"get", succeed(1)})
		require.False(t, k.limit(nil))
		assert.Equal(t, metrics.RateLimited, k.r.event)
		assert.EqualError(t, k.r.err, "over the limit")
		assert.Zero(t, k.gp, "the breakers were not asked")
		k.record()
		k.finish()
		assert.Zero(t, g.Breaker().Snapshot().Health.Requests)
	})
	t.Run("an invalid WithTimeout: BAD_REQUEST", func(t *testing.T) {
		g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore})
		k := openCall(t, g, op[int]{"get", succeed(1)}, WithTimeout(-2*time.Second))
		require.False(t, k.limit(nil))
		assert.Equal(t, metrics.BadRequest, k.r.event)
		assert.ErrorIs(t, k.r.err, ErrInvalidConfig)
		k.record()
		k.finish()
		assert.ErrorIs(t, k.err, ErrInvalidConfig, "a bad request's error is the caller's as is")
	})
	t.Run("a limiter that waits moves Run's start", func(t *testing.T) {
		reg, clock := newTestRegistry(t)
		var key string
		g, err := reg.NewGroup("deps", GroupConfig{Strategy: Semaphore, KeyedRateLimit: keyedFunc(func(_ context.Context, k string) error {
			key = k
			clock.Advance(5 * time.Millisecond) // a pacer's wait
			return nil
		})})
		require.NoError(t, err)
		k := openCall(t, g, op[int]{"get", succeed(1)})
		start := k.t0
		require.True(t, k.limit([]Option{WithKey("tenant-1")}))
		assert.Equal(t, "tenant-1", key)
		assert.Equal(t, start+5*time.Millisecond, k.t0)
		assert.Equal(t, start, k.start, "the attempt still starts when it started")
		k.r = result{event: metrics.Success, ran: true}
		k.now = k.t0
		k.record()
		k.finish()
	})
}

type keyedFunc func(ctx context.Context, key string) error

func (f keyedFunc) AdmitKey(ctx context.Context, key string) error { return f(ctx, key) }

func TestAdmitStage(t *testing.T) {
	t.Run("the group's breaker refuses", func(t *testing.T) {
		g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore})
		g.Breaker().SetMode(circuit.ForcedOpen)
		k := openCall(t, g, op[int]{"get", succeed(1)})
		require.False(t, k.admit())
		assert.Equal(t, metrics.ShortCircuited, k.r.event)
		assert.ErrorIs(t, k.r.err, circuit.ErrOpen)
		assert.Same(t, g.Breaker(), k.refuser())
		k.record()
		k.finish()
	})
	t.Run("the command's breaker refuses: record gives the group's probe back", func(t *testing.T) {
		g, clock := newTestGroup(t, GroupConfig{Strategy: Semaphore, Timeout: NoTimeout,
			Breaker: circuit.Config{MinRequests: 1, OpenDuration: time.Second, HalfOpenSuccesses: 1}})
		_, err := Execute(context.Background(), g, op[int]{"get", fail[int](errBoom)})
		require.ErrorIs(t, err, errBoom)
		require.Equal(t, circuit.Open, g.Breaker().State())
		clock.Advance(time.Second) // the group's breaker lets one probe through
		cb, _ := g.CommandBreaker("get")
		cb.SetMode(circuit.ForcedOpen)

		k := openCall(t, g, op[int]{"get", succeed(1)})
		require.False(t, k.admit())
		assert.Same(t, cb, k.refuser())
		require.True(t, k.gp.IsProbe(), "the group's breaker gave its one probe")
		_, err = g.Breaker().Allow()
		require.ErrorIs(t, err, breaker.ErrProbeLimit, "the probe slot is taken until record")
		k.record()
		p, err := g.Breaker().Allow()
		require.NoError(t, err, "record released the group's permit")
		p.Record(metrics.Cancelled, 0)
		k.finish()
		assert.Equal(t, circuit.HalfOpen, g.Breaker().State(), "the refusal was not counted")
	})
	t.Run("a probe is marked for isolate and record", func(t *testing.T) {
		g, clock := probeGroup(t, Semaphore, nil)
		tripped(t, g, clock)
		k := openCall(t, g, op[int]{"dep", succeed(1)})
		require.True(t, k.admit())
		assert.True(t, k.events.Has(metrics.Probe))
		k.classify(k.isolate())
		k.record()
		k.finish()
		assert.True(t, k.info().Events.Has(metrics.Probe))
		b, _ := g.CommandBreaker("dep")
		assert.Equal(t, circuit.Closed, b.State())
	})
}

// discardLog is a command whose Discard records what it got.
type discardLog struct {
	op[int]
	got *[]int
}

func (d discardLog) Discard(v int) { *d.got = append(*d.got, v) }

func TestClassifyStageOnEachKindOfEnd(t *testing.T) {
	// Each case gets a run context of its own: classify cancels it.
	expired := func() *deadline.Context {
		dl := deadline.New(context.Background(), time.Nanosecond)
		for dl.Err() == nil {
			time.Sleep(time.Microsecond)
		}
		return dl
	}
	gone := func() *deadline.Context {
		ctx, leave := context.WithCancel(context.Background())
		leave()
		return deadline.New(ctx, time.Hour)
	}
	live := func() *deadline.Context { return deadline.New(context.Background(), time.Hour) }
	panicked := isolation.NewPanicError("boom")
	cases := []struct {
		name     string
		strategy Strategy
		ctx      func() *deadline.Context
		returned bool
		err      error
		want     metrics.Event
		ran      bool
	}{
		{"success", Semaphore, live, true, nil, metrics.Success, true},
		{"failure", Semaphore, live, true, errBoom, metrics.Failure, true},
		{"bad request", Semaphore, live, true, BadRequest(errBoom), metrics.BadRequest, true},
		{"success after the deadline", Semaphore, expired, true, nil, metrics.Timeout, true},
		{"success after the caller left", Semaphore, gone, true, nil, metrics.Cancelled, true},
		{"panic", Semaphore, live, false, panicked, metrics.Failure, true},
		{"semaphore full", Semaphore, live, false, isolation.ErrRejected, metrics.SemaphoreRejected, false},
		{"pool full", Thread, live, false, isolation.ErrRejected, metrics.ThreadPoolRejected, false},
		{"bulkhead closed", Thread, live, false, isolation.ErrClosed, metrics.ThreadPoolRejected, false},
		{"detached at the deadline", Thread, expired, false, fmt.Errorf("%w: %w", isolation.ErrDetached, context.DeadlineExceeded), metrics.Timeout, false},
		{"dropped from the queue at the deadline", Thread, expired, false, fmt.Errorf("%w: %w", isolation.ErrDropped, context.DeadlineExceeded), metrics.QueueTimeout, false},
		{"dropped: the caller left", Thread, gone, false, fmt.Errorf("%w: %w", isolation.ErrDropped, context.Canceled), metrics.Cancelled, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := newTestGroup(t, GroupConfig{Strategy: tc.strategy})
			var discarded []int
			k := openCall(t, g, discardLog{op[int]{"get", succeed(7)}, &discarded})
			k.v = 7 // what Run returned, when it returned
			dl := tc.ctx()
			k.classify(dl, dl, time.Millisecond, tc.returned, tc.err)
			assert.Equal(t, tc.want, k.r.event)
			assert.Equal(t, tc.ran, k.r.ran)
			assert.Error(t, dl.Err(), "classify ends Run's deadline")
			if tc.want == metrics.Success || tc.want == metrics.BadRequest {
				assert.Equal(t, 7, k.v, "the caller gets Run's value")
				assert.Empty(t, discarded)
			} else if tc.ran {
				assert.Zero(t, k.v, "no later stage can hand it to the caller")
				assert.Equal(t, []int{7}, discarded, "Run's value went to Discard")
			}
			k.record()
			k.finish()
		})
	}
}

func TestRecordStageJudgesAProbeApart(t *testing.T) {
	g, clock := probeGroup(t, Semaphore, func(error) metrics.Event { return metrics.Success })
	tripped(t, g, clock)
	k := openCall(t, g, op[int]{"dep", fail[int](errStatus500)})
	require.True(t, k.admit())
	k.classify(k.isolate())
	require.Equal(t, metrics.Failure, k.r.event)
	k.record()
	assert.Equal(t, metrics.SetOf(metrics.Failure, metrics.Probe, metrics.ProbeSuccess), k.events)
	b, _ := g.CommandBreaker("dep")
	assert.Equal(t, circuit.Closed, b.State(), "the probe's answer closed the command's breaker")
	assert.Equal(t, int64(2), g.Breaker().Snapshot().Health.Failures,
		"the group's breaker, not probing, counts a failure (this one and the one that tripped the command's)")
	k.fallback()
	k.finish()
	assert.ErrorIs(t, k.err, errStatus500, "the caller still gets the failure")
}

func TestRetryStageStartsAWholeNewAttempt(t *testing.T) {
	g, clock, sleeper := retryGroup(t, Semaphore, retry.Config{MaxAttempts: 2, NoBudget: true}, nil)
	k := openCall(t, g, retryOp{name: "get", idem: true, run: fail[int](errBoom)})
	require.True(t, k.limit(nil))
	require.True(t, k.admit())
	clock.Advance(time.Millisecond)
	k.classify(k.isolate())
	k.record()
	require.True(t, k.failed())
	require.True(t, k.retry())
	assert.Equal(t, int32(2), k.attempts)
	assert.Equal(t, attempt{start: clock.Now(), t0: clock.Now(), now: clock.Now()}, k.attempt,
		"nothing of the failed attempt is left")
	assert.Len(t, sleeper.slept, 1)
	c := counts(t, g, "get")
	assert.Equal(t, int64(1), c[metrics.Failure])
	assert.Equal(t, int64(1), c[metrics.Retried], "the failed attempt was recorded, as retried")
	require.False(t, k.retry(), "MaxAttempts")
	k.r = result{event: metrics.Success, ran: true}
	k.finish()
}

func TestFinishStageClosesTheBooks(t *testing.T) {
	g, clock := newTestGroup(t, GroupConfig{Strategy: Semaphore})
	k := openCall(t, g, op[int]{"get", succeed(1)})
	c := g.commands.Load().names.get("get")
	require.Equal(t, int64(1), c.hot.inFlight.Load(), "begin entered the in-flight count")
	clock.Advance(3 * time.Millisecond)
	k.now = clock.Now()
	k.r = result{event: metrics.BadRequest, err: errBoom, run: 2 * time.Millisecond, ran: true}
	k.events.Add(metrics.BadRequest)
	k.finish()
	assert.Same(t, errBoom, k.err, "a bad request's error goes back as Run returned it")
	assert.Zero(t, c.hot.inFlight.Load())
	counted := counts(t, g, "get")
	assert.Equal(t, int64(1), counted[metrics.BadRequest])
	assert.Equal(t, int64(1), counted[metrics.ExceptionThrown])
	info := k.info()
	assert.Equal(t, Info{Command: "get", Event: metrics.BadRequest,
		Events:  metrics.SetOf(metrics.BadRequest, metrics.ExceptionThrown),
		Latency: 3 * time.Millisecond, RunLatency: 2 * time.Millisecond, Attempts: 1}, info)
}
