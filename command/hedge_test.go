package command

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command/hedge"
	"github.com/bulwark-go/bulwark/metrics"
)

// dep is a dependency under a test's control: each Run of a hedgeOp hands
// its context and a release here, and waits for the release (its value,
// or an error) or for its context, unless stubborn.
type dep struct {
	runs     chan depRun
	stubborn bool // Run ignores its context: it waits for its release
}

type depRun struct {
	ctx     context.Context
	release chan int // a value to return; -1: an error
}

// hedgeOp is an idempotent command whose Run waits for dep, and whose late
// values are counted in discarded.
type hedgeOp struct {
	d         *dep
	idem      bool
	discarded *[]int
	mu        *sync.Mutex
}

func (o hedgeOp) Name() string     { return "op" }
func (o hedgeOp) Idempotent() bool { return o.idem }
func (o hedgeOp) Run(ctx context.Context) (int, error) {
	r := depRun{ctx: ctx, release: make(chan int, 1)}
	o.d.runs <- r
	var v int
	if o.d.stubborn {
		v = <-r.release
	} else {
		select {
		case v = <-r.release:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if v < 0 {
		return 0, errors.New("dependency failed")
	}
	return v, nil
}
func (o hedgeOp) Discard(v int) {
	o.mu.Lock()
	*o.discarded = append(*o.discarded, v)
	o.mu.Unlock()
}

// hedgeGate is a hedge.Config.Sleep under the test's control: each delay armed
// is handed here with its wake-up; the test moves the clock and wakes it.
type hedgeGate struct {
	delays chan gateSleep
	clock  *metrics.ManualClock
}

type gateSleep struct {
	d    time.Duration
	wake chan struct{}
	ctx  context.Context
}

func (g *hedgeGate) sleep(ctx context.Context, d time.Duration) error {
	s := gateSleep{d: d, wake: make(chan struct{}), ctx: ctx}
	select {
	case g.delays <- s:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-s.wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fire moves the clock by the armed delay s and wakes the hedge.
func (g *hedgeGate) fire(s gateSleep) {
	g.clock.Advance(s.d)
	close(s.wake)
}

type hedgeFixture struct {
	g         *Group
	clock     *metrics.ManualClock
	dep       *dep
	gate      *hedgeGate
	op        hedgeOp
	mu        sync.Mutex
	discarded []int
}

// newHedgeFixture returns a group of strategy s whose command "op" hedges
// with hc (its Sleep the fixture's gate), breakers forced closed unless
// edit changes them.
func newHedgeFixture(t *testing.T, s Strategy, hc hedge.Config, edit func(*GroupConfig)) *hedgeFixture {
	t.Helper()
	reg, clock := newTestRegistry(t)
	f := &hedgeFixture{clock: clock, dep: &dep{runs: make(chan depRun)}}
	f.gate = &hedgeGate{delays: make(chan gateSleep), clock: clock}
	hc.Sleep = f.gate.sleep
	cfg := GroupConfig{Strategy: s, Timeout: NoTimeout, Commands: map[string]CommandConfig{"op": {Hedge: hc}}}
	if edit != nil {
		edit(&cfg)
	}
	g, err := reg.NewGroup("deps", cfg)
	require.NoError(t, err)
	f.g = g
	f.op = hedgeOp{d: f.dep, idem: true, discarded: &f.discarded, mu: &f.mu}
	return f
}

type callResult struct {
	v    int
	info Info
	err  error
}

// call starts a call of the fixture's command; its answer comes on the
// channel returned.
func (f *hedgeFixture) call(ctx context.Context) <-chan callResult {
	out := make(chan callResult, 1)
	go func() {
		v, info, err := ExecuteInfo(ctx, f.g, f.op)
		out <- callResult{v, info, err}
	}()
	return out
}

func (f *hedgeFixture) counts() metrics.Counts {
	return f.g.Snapshot().Commands[0].Metrics.Cumulative
}

func bothStrategies(t *testing.T, test func(t *testing.T, s Strategy)) {
	for _, s := range []Strategy{Thread, Semaphore} {
		t.Run(s.String(), func(t *testing.T) { test(t, s) })
	}
}

// TestHedgeFirstSuccessWins: the first attempt hangs past the delay, the
// hedge answers; the first attempt is cancelled and recorded as HEDGED, the
// call counts once, and the caller's latency counts from the call's start.
func TestHedgeFirstSuccessWins(t *testing.T) {
	bothStrategies(t, func(t *testing.T, s Strategy) {
		f := newHedgeFixture(t, s, hedge.Config{MaxHedges: 1, Delay: 50 * time.Millisecond, BudgetRatio: 1}, nil)
		done := f.call(context.Background())
		first := receive(t, f.dep.runs, "the first attempt")
		armed := receive(t, f.gate.delays, "the hedge's delay")
		assert.Equal(t, 50*time.Millisecond, armed.d)
		f.gate.fire(armed)
		hedge := receive(t, f.dep.runs, "the hedge")
		f.clock.Advance(10 * time.Millisecond)
		hedge.release <- 2
		r := receive(t, done, "the answer")
		require.NoError(t, r.err)
		assert.Equal(t, 2, r.v)
		assert.Equal(t, metrics.Success, r.info.Event)
		assert.Equal(t, 2, r.info.Attempts)
		assert.Equal(t, 60*time.Millisecond, r.info.Latency)
		<-first.ctx.Done() // the loser is cancelled
		require.Eventually(t, func() bool { return f.counts()[metrics.Hedged] == 1 }, 10*time.Second, time.Millisecond)
		n := f.counts()
		assert.Equal(t, int64(1), n[metrics.Success])
		assert.Equal(t, int64(1), n[metrics.Cancelled], "the loser, cancelled")
		assert.Equal(t, int64(1), n.Calls(), "one call")
		assert.Equal(t, int64(2), n.Attempts(), "two attempts")
		assert.Zero(t, f.g.retries.pending.Load(), "nothing pending in the budget")
	})
}

// TestHedgeLateValueDiscarded: a loser that ignores its cancellation and
// returns a value later hands it to Discard.
func TestHedgeLateValueDiscarded(t *testing.T) {
	bothStrategies(t, func(t *testing.T, s Strategy) {
		f := newHedgeFixture(t, s, hedge.Config{MaxHedges: 1, Delay: time.Millisecond, BudgetRatio: 1}, nil)
		f.dep.stubborn = true
		done := f.call(context.Background())
		first := receive(t, f.dep.runs, "the first attempt")
		f.gate.fire(receive(t, f.gate.delays, "the hedge's delay"))
		hedge := receive(t, f.dep.runs, "the hedge")
		hedge.release <- 2
		assert.Equal(t, 2, receive(t, done, "the answer").v)
		first.release <- 1 // late
		// The loser is recorded (HEDGED) before its value goes to Discard:
		// wait for the value, not for the count.
		require.Eventually(t, func() bool {
			f.mu.Lock()
			defer f.mu.Unlock()
			return len(f.discarded) > 0
		}, 10*time.Second, time.Millisecond)
		f.mu.Lock()
		assert.Equal(t, []int{1}, f.discarded)
		f.mu.Unlock()
		n := f.counts()
		assert.Equal(t, int64(1), n[metrics.Cancelled], "a success after its cancellation is CANCELLED")
		assert.Equal(t, int64(1), n.Calls())
	})
}

// TestHedgeNotNeeded: an attempt that answers before the delay starts no
// hedge, and gives back the budget it held.
func TestHedgeNotNeeded(t *testing.T) {
	f := newHedgeFixture(t, Semaphore, hedge.Config{MaxHedges: 2, Delay: 50 * time.Millisecond}, nil)
	done := f.call(context.Background())
	first := receive(t, f.dep.runs, "the first attempt")
	armed := receive(t, f.gate.delays, "the hedge's delay")
	first.release <- 1
	r := receive(t, done, "the answer")
	assert.Equal(t, 1, r.v)
	assert.Equal(t, 1, r.info.Attempts)
	<-armed.ctx.Done() // the delay is called off
	n := f.counts()
	assert.Zero(t, n[metrics.Hedged])
	assert.Equal(t, int64(1), n.Attempts())
	assert.Zero(t, f.g.retries.pending.Load())
}

// TestHedgeFailuresWaitForTheRest: a failed attempt beside a running one
// is lost; the last attempt's answer stands; with two hedges, the second
// starts two delays after the first attempt.
func TestHedgeFailuresWaitForTheRest(t *testing.T) {
	f := newHedgeFixture(t, Thread, hedge.Config{MaxHedges: 2, Delay: 10 * time.Millisecond, BudgetRatio: 1}, nil)
	done := f.call(context.Background())
	first := receive(t, f.dep.runs, "the first attempt")
	f.gate.fire(receive(t, f.gate.delays, "the first hedge's delay"))
	h1 := receive(t, f.dep.runs, "the first hedge")
	h1.release <- -1 // fails: the first attempt still runs
	f.gate.fire(receive(t, f.gate.delays, "the second hedge's delay"))
	h2 := receive(t, f.dep.runs, "the second hedge")
	first.release <- -1
	h2.release <- -1
	r := receive(t, done, "the answer")
	require.Error(t, r.err)
	assert.Equal(t, metrics.Failure, r.info.Event)
	assert.Equal(t, 3, r.info.Attempts)
	require.Eventually(t, func() bool { return f.counts()[metrics.Hedged] == 2 }, 10*time.Second, time.Millisecond)
	n := f.counts()
	assert.Equal(t, int64(3), n[metrics.Failure])
	assert.Equal(t, int64(1), n.Calls())
	assert.Equal(t, int64(3), f.g.Snapshot().Commands[0].Breaker.Health.Failures, "the breaker sees each attempt")
}

// TestHedgeOnlyIdempotent: a command that is not Idempotent never hedges.
func TestHedgeOnlyIdempotent(t *testing.T) {
	f := newHedgeFixture(t, Semaphore, hedge.Config{MaxHedges: 1, Delay: time.Millisecond}, nil)
	f.op.idem = false
	done := f.call(context.Background())
	first := receive(t, f.dep.runs, "the attempt")
	select {
	case <-f.gate.delays:
		t.Fatal("a hedge was armed for a command that is not idempotent")
	default:
	}
	first.release <- 1
	assert.Equal(t, 1, receive(t, done, "the answer").info.Attempts)
}

// TestHedgeNeverWhileBreakerNotClosed: a breaker that opens while the
// first attempt runs stops the hedge (no extra load on a dependency
// judged sick); a probe of a half-open breaker is never hedged.
func TestHedgeNeverWhileBreakerNotClosed(t *testing.T) {
	f := newHedgeFixture(t, Semaphore, hedge.Config{MaxHedges: 1, Delay: time.Millisecond, BudgetRatio: 1}, func(c *GroupConfig) {
		c.CommandBreaker = circuit.Config{MinRequests: 1, FailureRatio: 0.5, OpenDuration: time.Second,
			HalfOpenProbes:    1,
			HalfOpenSuccesses: 1}
	})
	done := f.call(context.Background())
	first := receive(t, f.dep.runs, "the first attempt")
	armed := receive(t, f.gate.delays, "the hedge's delay")
	f.g.Breaker().SetMode(circuit.ForcedOpen) // the group's
	f.gate.fire(armed)
	assert.Eventually(t, func() bool { return f.g.retries.pending.Load() == 0 }, 10*time.Second, time.Millisecond,
		"the hedge is given up")
	first.release <- -1
	r := receive(t, done, "the answer")
	assert.Equal(t, 1, r.info.Attempts)
	assert.Zero(t, f.counts()[metrics.Hedged])

	// The command's breaker, opened by the failure above, is half-open
	// after its duration: the probe runs alone.
	f.g.Breaker().SetMode(circuit.Normal)
	cb, _ := f.g.CommandBreaker("op")
	require.Equal(t, circuit.Open, cb.State())
	f.clock.Advance(2 * time.Second)
	done = f.call(context.Background())
	probe := receive(t, f.dep.runs, "the probe")
	assert.True(t, IsProbe(probe.ctx))
	select {
	case <-f.gate.delays:
		t.Fatal("a probe was hedged")
	default:
	}
	probe.release <- 1
	r = receive(t, done, "the probe's answer")
	assert.True(t, r.info.Events.Has(metrics.Probe))
	assert.Equal(t, 1, r.info.Attempts)
}

// TestHedgeBudget: hedges stay within BudgetRatio of the calls (plus one a
// second over the window), however slow every first attempt is.
func TestHedgeBudget(t *testing.T) {
	f := newHedgeFixture(t, Semaphore, hedge.Config{MaxHedges: 1, Delay: time.Millisecond, BudgetRatio: 0.05}, nil)
	const calls = 1000
	for range calls {
		done := f.call(context.Background())
		first := receive(t, f.dep.runs, "the first attempt")
		if f.g.retries.pending.Load() == 1 { // the budget had room: a delay is armed
			f.gate.fire(receive(t, f.gate.delays, "the delay"))
			receive(t, f.dep.runs, "the hedge").release <- 1
		} else {
			first.release <- 1
		}
		receive(t, done, "the answer")
		require.Eventually(t, func() bool { return f.g.retries.pending.Load() == 0 }, 10*time.Second, time.Millisecond)
	}
	n := f.counts()
	window := f.g.Snapshot().Metrics.Window.Length.Seconds()
	assert.Equal(t, int64(calls), n.Calls())
	assert.LessOrEqual(t, float64(n[metrics.Hedged]), 0.05*calls+window+1)
	assert.Positive(t, n[metrics.Hedged])
	t.Logf("%d hedges for %d calls", n[metrics.Hedged], calls)
}

// TestHedgePercentileDelay: the delay is the command's p90 Run latency,
// clamped, and MaxDelay before the window holds any.
func TestHedgePercentileDelay(t *testing.T) {
	f := newHedgeFixture(t, Semaphore, hedge.Config{MaxHedges: 1, Percentile: 90, MinDelay: 5 * time.Millisecond,
		MaxDelay: 200 * time.Millisecond, BudgetRatio: 1}, nil)
	var delays []time.Duration
	for i := range 20 {
		done := f.call(context.Background())
		first := receive(t, f.dep.runs, "the first attempt")
		armed := receive(t, f.gate.delays, "the delay")
		delays = append(delays, armed.d)
		f.clock.Advance(time.Duration(i%10+1) * 10 * time.Millisecond) // 10..100 ms
		first.release <- 1
		receive(t, done, "the answer")
		f.clock.Advance(time.Second) // a new bucket: the delay is read again
	}
	assert.Equal(t, 200*time.Millisecond, delays[0], "MaxDelay with an empty window")
	assert.InDelta(t, float64(90*time.Millisecond), float64(delays[19]), float64(5*time.Millisecond), "p90 of 10..100 ms")
}

// TestHedgeConfigValidation: every bad field is named with its value.
func TestHedgeConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		hc   hedge.Config
		want string
	}{
		{hedge.Config{MaxHedges: -1}, `Commands["op"].Hedge.MaxHedges -1`},
		{hedge.Config{MaxHedges: 10, Delay: time.Millisecond}, `Commands["op"].Hedge.MaxHedges 10`},
		{hedge.Config{MaxHedges: 1}, `Commands["op"].Hedge.Delay 0s must be positive`},
		{hedge.Config{MaxHedges: 1, Percentile: 100, MaxDelay: time.Second}, `Commands["op"].Hedge.Percentile 100`},
		{hedge.Config{MaxHedges: 1, Percentile: 90, MinDelay: -1, MaxDelay: time.Second}, `Commands["op"].Hedge.MinDelay -1ns`},
		{hedge.Config{MaxHedges: 1, Percentile: 90, MinDelay: time.Second, MaxDelay: time.Millisecond}, `Commands["op"].Hedge.MaxDelay 1ms`},
		{hedge.Config{MaxHedges: 1, Delay: time.Millisecond, BudgetRatio: 1.5}, `Commands["op"].Hedge.BudgetRatio 1.5`},
	} {
		err := GroupConfig{Commands: map[string]CommandConfig{"op": {Hedge: tc.hc}}}.Validate()
		require.ErrorIs(t, err, ErrInvalidConfig, tc.want)
		assert.Contains(t, err.Error(), tc.want)
	}
	assert.NoError(t, GroupConfig{Commands: map[string]CommandConfig{"op": {Hedge: hedge.Config{Delay: -1}}}}.Validate(),
		"off: the other fields are not read")
}

// TestHedgeReconfigure: Reconfigure turns hedging on and off.
func TestHedgeReconfigure(t *testing.T) {
	f := newHedgeFixture(t, Semaphore, hedge.Config{}, nil)
	cfg := f.g.Config()
	cfg.Commands = map[string]CommandConfig{"op": {Hedge: hedge.Config{MaxHedges: 1, Delay: time.Millisecond, BudgetRatio: 1, Sleep: f.gate.sleep}}}
	done := f.call(context.Background())
	first := receive(t, f.dep.runs, "an attempt without hedging")
	first.release <- 1
	receive(t, done, "the answer")
	require.NoError(t, f.g.Reconfigure(cfg))
	done = f.call(context.Background())
	first = receive(t, f.dep.runs, "the first attempt")
	f.gate.fire(receive(t, f.gate.delays, "the delay, after Reconfigure"))
	receive(t, f.dep.runs, "the hedge").release <- 2
	assert.Equal(t, 2, receive(t, done, "the answer").info.Attempts)
	<-first.ctx.Done()
}

// TestConservationWithHedges: under -race, many callers of a hedged
// command whose attempts race (every delay ends at once), each call ends
// in exactly one outcome, every attempt is recorded once (the call's, or
// HEDGED), the breakers count each attempt that reached the dependency,
// and every value no caller got goes to Discard.
func TestConservationWithHedges(t *testing.T) {
	bothStrategies(t, func(t *testing.T, s Strategy) {
		reg, _ := newTestRegistry(t)
		hc := hedge.Config{MaxHedges: 2, Delay: time.Millisecond, BudgetRatio: 1,
			Sleep: func(ctx context.Context, d time.Duration) error { runtime.Gosched(); return ctx.Err() }}
		g, err := reg.NewGroup("deps", GroupConfig{Strategy: s, MaxConcurrent: 64, Timeout: NoTimeout,
			Breaker: circuit.Config{Mode: circuit.ForcedClosed}, CommandBreaker: circuit.Config{Mode: circuit.ForcedClosed},
			Commands: map[string]CommandConfig{"race": {Hedge: hc}}})
		require.NoError(t, err)
		var runs, valued, discards, delivered, outcomes atomic.Int64
		const callers, each = 8, 200
		var wg sync.WaitGroup
		for w := range callers {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(w), 7))
				var mu sync.Mutex
				for range each {
					mu.Lock()
					x := r.IntN(10)
					mu.Unlock()
					cmd := raceOp{x: x, runs: &runs, valued: &valued, discards: &discards}
					v, _, err := ExecuteInfo(context.Background(), g, cmd)
					outcomes.Add(1)
					if err == nil && v != 0 {
						delivered.Add(1)
					}
				}
			})
		}
		wg.Wait()
		require.Eventually(t, func() bool { return g.retries.pending.Load() == 0 && g.hot.running.Load() == 0 },
			10*time.Second, time.Millisecond)
		n := g.Snapshot().Commands[0].Metrics.Cumulative
		assert.Equal(t, int64(callers*each), outcomes.Load())
		assert.Equal(t, int64(callers*each), n.Calls(), "one outcome per call")
		// An attempt cancelled before its Run started (the call was
		// answered) is recorded, CANCELLED, without a Run.
		ran := n.Attempts() - n[metrics.SemaphoreRejected] - n[metrics.ThreadPoolRejected] - n[metrics.QueueTimeout]
		assert.LessOrEqual(t, runs.Load(), ran, "a record per attempt: %v", n)
		assert.GreaterOrEqual(t, runs.Load(), ran-n[metrics.Cancelled], "a record per attempt: %v", n)
		assert.Equal(t, n.Attempts()-int64(callers*each), n[metrics.Hedged], "every attempt but the call's is HEDGED")
		h := g.Snapshot().Commands[0].Breaker.Health
		assert.Equal(t, n[metrics.Success]+n[metrics.Failure]+n[metrics.Timeout], h.Requests, "the breaker sees each attempt")
		assert.Equal(t, valued.Load()-delivered.Load(), discards.Load(), "every value no caller got is discarded")
		assert.Positive(t, n[metrics.Hedged])
		t.Logf("%d calls, %d attempts, %d hedged, %d discarded", callers*each, runs.Load(), n[metrics.Hedged], discards.Load())
	})
}

// raceOp is TestConservationWithHedges's command: by x, it succeeds at
// once, fails at once, or spins (yielding) until cancelled or done.
type raceOp struct {
	x                      int
	runs, valued, discards *atomic.Int64
}

func (o raceOp) Name() string     { return "race" }
func (o raceOp) Idempotent() bool { return true }
func (o raceOp) Discard(int)      { o.discards.Add(1) }
func (o raceOp) Run(ctx context.Context) (int, error) {
	o.runs.Add(1)
	switch {
	case o.x < 2:
		return 0, errors.New("fails")
	case o.x < 5:
		o.valued.Add(1)
		return 1, nil
	}
	for i := 0; i < 200 && ctx.Err() == nil; i++ {
		runtime.Gosched()
	}
	o.valued.Add(1)
	return 1, nil
}
