package command

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command/fallback"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/ratelimit"
)

// gate is a dependency whose calls block until it opens, counting them.
type gate struct {
	open chan struct{}
	runs atomic.Int64
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

// run is a Run that counts itself, waits for the gate (or its ctx) and
// answers v.
func (d *gate) run(v int) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		d.runs.Add(1)
		select {
		case <-d.open:
			return v, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// coalescingGroup returns a Semaphore group whose command "get" coalesces,
// without a timeout (a loaded machine may take seconds to start 1,000
// goroutines).
func coalescingGroup(t *testing.T) *Group {
	t.Helper()
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, MaxConcurrent: 10, Timeout: NoTimeout,
		Commands: map[string]CommandConfig{"get": {Coalesce: true}}})
	return g
}

// waiting returns how many callers wait for the flight of key of the
// command name, 0 if there is none.
func waiting[T any](g *Group, name, key string) int {
	c := g.commands.Load().names.get(name)
	c.flights.mu.Lock()
	defer c.flights.mu.Unlock()
	if f, ok := c.flights.m[key].(*flight[T]); ok {
		return f.waiting
	}
	return 0
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond, what)
}

// TestCoalesceThousandCallsOneRun: 1,000 concurrent calls of one key share
// one Run: each gets its value and its own Info (one leader, SUCCESS; 999
// COALESCED), the breakers count one call, and the window counts 1,000
// calls, each with one primary outcome.
func TestCoalesceThousandCallsOneRun(t *testing.T) {
	g := coalescingGroup(t)
	dep := newGate()
	const n = 1000
	infos := make([]Info, n)
	vals := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vals[i], infos[i], errs[i] = ExecuteInfo(context.Background(), g, keyedOp{op[int]{"get", dep.run(42)}, "user:7"})
		}()
	}
	waitFor(t, "1,000 callers waiting", func() bool { return waiting[int](g, "get", "user:7") == n })
	close(dep.open)
	wg.Wait()

	assert.EqualValues(t, 1, dep.runs.Load(), "one Run")
	leaders := 0
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, 42, vals[i])
		assert.False(t, infos[i].Degraded)
		switch infos[i].Event {
		case metrics.Success:
			leaders++
			assert.Equal(t, 1, infos[i].Attempts)
		case metrics.Coalesced:
			assert.Equal(t, metrics.SetOf(metrics.Coalesced), infos[i].Events)
			assert.Zero(t, infos[i].Attempts, "a coalesced call made no attempt")
			assert.Zero(t, infos[i].RunLatency)
		default:
			t.Fatalf("call %d: event %v", i, infos[i].Event)
		}
	}
	assert.Equal(t, 1, leaders, "one leader")
	c := counts(t, g, "get")
	assert.EqualValues(t, 1, c[metrics.Success])
	assert.EqualValues(t, n-1, c[metrics.Coalesced])
	assert.EqualValues(t, n, c.Calls(), "one primary outcome per call")
	b, _ := g.CommandBreaker("get")
	assert.EqualValues(t, 1, b.Snapshot().Health.Requests, "the command's breaker saw one call")
	assert.EqualValues(t, 1, g.Breaker().Snapshot().Health.Requests, "the group's breaker saw one call")
	assert.Zero(t, g.commands.Load().names.get("get").hot.inFlight.Load())
}

// keyed is a command whose key is its Key method's.
type keyed struct {
	id  string
	dep *gate
}

func (k keyed) Name() string                                 { return "get" }
func (k keyed) Key() string                                  { return k.id }
func (k keyed) Run(ctx context.Context) (int, error)         { return k.dep.run(len(k.id))(ctx) }
func (k keyed) Fallback(context.Context, error) (int, error) { return -1, nil }

// keyedOp, keyedFB and keyedDiscards are the tests' commands with a Key.
type keyedOp struct {
	op[int]
	key string
}

func (k keyedOp) Key() string { return k.key }

type keyedFB struct {
	opFB[int]
	key string
}

func (k keyedFB) Key() string { return k.key }

type keyedDiscards struct {
	countDiscards
	key string
}

func (k keyedDiscards) Key() string { return k.key }

// TestCoalesceByKey: calls share a Run only with calls of the same Key,
// WithKey (the rate-limit key) does not change it, and a call without a Key
// runs alone.
func TestCoalesceByKey(t *testing.T) {
	g := coalescingGroup(t)
	dep := newGate()
	type answer struct {
		v    int
		info Info
	}
	out := make(chan answer, 5)
	call := func(cmd Runner[int], opts ...Option) {
		go func() {
			v, info, err := ExecuteInfo(context.Background(), g, cmd, opts...)
			assert.NoError(t, err)
			out <- answer{v, info}
		}()
	}
	call(keyed{"a", dep})
	call(keyed{"a", dep})
	call(keyed{"bb", dep})
	call(keyed{"cc", dep}, WithKey("bb")) // its own Key, not WithKey's: a flight of its own
	waitFor(t, "flights of two, one and one", func() bool {
		return waiting[int](g, "get", "a") == 2 && waiting[int](g, "get", "bb") == 1 && waiting[int](g, "get", "cc") == 1
	})
	call(op[int]{"get", dep.run(9)}, WithKey("a")) // no Key: alone, whatever its WithKey
	waitFor(t, "four Runs", func() bool { return dep.runs.Load() == 4 })
	close(dep.open)
	got := map[int]int{}
	for range 5 {
		a := receive(t, out, "an answer")
		got[a.v]++
	}
	assert.Equal(t, map[int]int{1: 2, 2: 2, 9: 1}, got, "key a answers 1 (both calls), keys bb and cc 2 each, the keyless call 9")
	assert.EqualValues(t, 4, dep.runs.Load())
	assert.EqualValues(t, 1, counts(t, g, "get")[metrics.Coalesced])
}

// TestCoalesceWaiterDeadlineHolds: a call that joins a flight keeps its own
// timeout: it gets its TIMEOUT (and its fallback) while the shared Run goes
// on for the others; the breakers do not count its timeout.
func TestCoalesceWaiterDeadlineHolds(t *testing.T) {
	g := coalescingGroup(t)
	dep := newGate()
	leader := make(chan error, 1)
	go func() {
		_, err := Execute(context.Background(), g, keyedOp{op[int]{"get", dep.run(5)}, "k"})
		leader <- err
	}()
	waitFor(t, "the flight", func() bool { return waiting[int](g, "get", "k") == 1 })
	impatient := opFB[int]{op[int]{"get", dep.run(5)}, func(ctx context.Context, err error) (int, error) {
		assert.ErrorIs(t, err, ErrTimeout)
		return -1, nil
	}}
	v, info, err := ExecuteInfo(context.Background(), g, keyedFB{impatient, "k"}, WithTimeout(20*time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, -1, v, "its own fallback")
	assert.Equal(t, metrics.Timeout, info.Event)
	assert.True(t, info.Degraded)
	assert.Equal(t, 1, waiting[int](g, "get", "k"), "the flight goes on for the leader")

	close(dep.open)
	require.NoError(t, receive(t, leader, "the leader's answer"))
	c := counts(t, g, "get")
	assert.EqualValues(t, 1, c[metrics.Success])
	assert.EqualValues(t, 1, c[metrics.Timeout])
	assert.EqualValues(t, 1, c[metrics.FallbackSuccess])
	assert.EqualValues(t, 2, c.Calls())
	b, _ := g.CommandBreaker("get")
	h := b.Snapshot().Health
	assert.EqualValues(t, 1, h.Requests, "the breaker saw the Run, not the waiter's timeout")
	assert.Zero(t, h.Timeouts)
}

// TestCoalesceLeaderLeaves: the caller that started the flight may leave
// (its context ends: CANCELLED); the Run goes on and answers the calls
// that joined it, and is recorded once, as the leader's call.
func TestCoalesceLeaderLeaves(t *testing.T) {
	g := coalescingGroup(t)
	dep := newGate()
	ctx, cancel := context.WithCancel(context.Background())
	leader := make(chan Info, 1)
	go func() {
		_, info, err := ExecuteInfo(ctx, g, keyedOp{op[int]{"get", dep.run(5)}, "k"})
		assert.ErrorIs(t, err, context.Canceled)
		leader <- info
	}()
	waitFor(t, "the flight", func() bool { return waiting[int](g, "get", "k") == 1 })
	joined := make(chan int, 1)
	go func() {
		v, err := Execute(context.Background(), g, keyedOp{op[int]{"get", dep.run(5)}, "k"})
		assert.NoError(t, err)
		joined <- v
	}()
	waitFor(t, "a second caller", func() bool { return waiting[int](g, "get", "k") == 2 })
	cancel()
	info := receive(t, leader, "the leader's answer")
	assert.Equal(t, metrics.Cancelled, info.Event)
	assert.True(t, info.Events.Has(metrics.ExceptionThrown))
	close(dep.open)
	assert.Equal(t, 5, receive(t, joined, "the joined call's answer"))
	waitFor(t, "the flight recorded", func() bool { return counts(t, g, "get").Calls() == 2 })
	c := counts(t, g, "get")
	assert.EqualValues(t, 1, c[metrics.Success], "the Run, as the leader's call")
	assert.EqualValues(t, 1, c[metrics.Coalesced])
	assert.Zero(t, c[metrics.Cancelled], "the leader's call is the flight's")
}

// lastGoodCmd is a command with a fallback.LastGood fallback that stores what Run
// returns.
type lastGoodCmd struct {
	*fallback.LastGood[int]
	run func(context.Context) (int, error)
}

func (c lastGoodCmd) Name() string { return "get" }
func (c lastGoodCmd) Key() string  { return "price" }
func (c lastGoodCmd) Run(ctx context.Context) (int, error) {
	v, err := c.run(ctx)
	if err == nil {
		c.Store(v)
	}
	return v, err
}

// TestCoalesceStaleWhileRevalidate: with a fallback.LastGood, one refresh is in
// flight per key while the calls that join it are answered at once with
// the last good value, degraded; an expired value is not served.
func TestCoalesceStaleWhileRevalidate(t *testing.T) {
	reg, clock := newTestRegistry(t)
	g, err := reg.NewGroup("deps", GroupConfig{Strategy: Semaphore, Commands: map[string]CommandConfig{"get": {Coalesce: true}}})
	require.NoError(t, err)
	lg, err := fallback.NewLastGood[int](time.Minute, clock)
	require.NoError(t, err)
	lg.Store(1)
	dep := newGate()
	cmd := lastGoodCmd{lg, dep.run(2)}
	refreshed := make(chan int, 1)
	go func() {
		v, err := Execute(context.Background(), g, cmd)
		assert.NoError(t, err)
		refreshed <- v
	}()
	waitFor(t, "the refresh", func() bool { return waiting[int](g, "get", "price") == 1 })
	for range 50 {
		v, info, err := ExecuteInfo(context.Background(), g, cmd)
		require.NoError(t, err)
		assert.Equal(t, 1, v, "the last good value, at once")
		assert.True(t, info.Degraded)
		assert.Equal(t, metrics.SetOf(metrics.Coalesced, metrics.FallbackSuccess, metrics.DegradedLastGood), info.Events)
	}
	clock.Advance(2 * time.Minute) // the stored value is now too old: a call that joins waits
	stale := make(chan int, 1)
	go func() {
		v, info, err := ExecuteInfo(context.Background(), g, cmd)
		assert.NoError(t, err)
		assert.Equal(t, metrics.Coalesced, info.Event)
		assert.False(t, info.Degraded)
		stale <- v
	}()
	waitFor(t, "a waiting caller", func() bool { return waiting[int](g, "get", "price") == 2 })
	close(dep.open)
	assert.Equal(t, 2, receive(t, refreshed, "the refresh"))
	assert.Equal(t, 2, receive(t, stale, "the waiting call"))
	assert.EqualValues(t, 1, dep.runs.Load(), "one refresh")
	c := g.commands.Load().names.get("get").metrics.Cumulative() // the clock has left the window
	assert.EqualValues(t, 51, c[metrics.Coalesced])
	assert.EqualValues(t, 50, c[metrics.FallbackSuccess])
	assert.EqualValues(t, 50, c[metrics.DegradedLastGood], "each stale answer is a last good value")
	assert.EqualValues(t, 52, c.Calls())
}

// staticKind is a keyed command whose fallback declares its answers static
// defaults (fallback.Degrader).
type staticKind struct{ keyedFB }

func (staticKind) Degradation() metrics.Event { return metrics.DegradedStatic }

// TestCoalesceSharesAFailedAnswer: a Run that fails is retried or falls
// back once, in the flight; every caller gets the fallback's value,
// degraded, with the kind the fallback declares (DEGRADED_STATIC, in its
// Info and in the metrics), and the breakers count one failure.
func TestCoalesceSharesAFailedAnswer(t *testing.T) {
	g := coalescingGroup(t)
	var runs, fallbacks atomic.Int64
	release := make(chan struct{})
	cmd := opFB[int]{op[int]{"get", func(context.Context) (int, error) {
		runs.Add(1)
		<-release
		return 0, errors.New("down")
	}}, func(context.Context, error) (int, error) { fallbacks.Add(1); return -1, nil }}
	const n = 20
	var wg sync.WaitGroup
	var degraded atomic.Int64
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, info, err := ExecuteInfo(context.Background(), g, staticKind{keyedFB{cmd, "k"}})
			assert.NoError(t, err)
			assert.Equal(t, -1, v)
			if info.Degraded && info.Events.Has(metrics.FallbackSuccess) && info.Events.Has(metrics.DegradedStatic) {
				degraded.Add(1)
			}
		}()
	}
	waitFor(t, "every caller waiting", func() bool { return waiting[int](g, "get", "k") == n })
	close(release)
	wg.Wait()
	assert.EqualValues(t, 1, runs.Load())
	assert.EqualValues(t, 1, fallbacks.Load(), "the fallback ran once, in the flight")
	assert.EqualValues(t, n, degraded.Load(), "every caller got the degraded answer")
	c := counts(t, g, "get")
	assert.EqualValues(t, 1, c[metrics.Failure])
	assert.EqualValues(t, n-1, c[metrics.Coalesced])
	assert.EqualValues(t, n, c[metrics.FallbackSuccess])
	assert.EqualValues(t, n, c[metrics.DegradedStatic])
	b, _ := g.CommandBreaker("get")
	assert.EqualValues(t, 1, b.Snapshot().Health.Failures)
}

// countDiscards counts the values handed to Discard.
type countDiscards struct {
	op[int]
	discarded *atomic.Int64
}

func (d countDiscards) Discard(int) { d.discarded.Add(1) }

// TestCoalesceDiscardsAnUntakenValue: when every caller has left before
// the Run answered, its value goes to Discard, once.
func TestCoalesceDiscardsAnUntakenValue(t *testing.T) {
	g := coalescingGroup(t)
	dep := newGate()
	var discarded atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cmd := countDiscards{op[int]{"get", dep.run(3)}, &discarded}
	_, err := Execute(ctx, g, keyedDiscards{cmd, "k"})
	require.ErrorIs(t, err, context.Canceled, "the caller had left")
	close(dep.open)
	waitFor(t, "the flight's end", func() bool { return counts(t, g, "get").Calls() == 1 })
	waitFor(t, "the value discarded", func() bool { return discarded.Load() == 1 })
}

// TestCoalesceReconfigure: Coalesce is a live setting.
func TestCoalesceReconfigure(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore})
	dep := newGate()
	close(dep.open)
	_, info, err := ExecuteInfo(context.Background(), g, keyed{"a", dep})
	require.NoError(t, err)
	assert.Equal(t, metrics.Success, info.Event)
	require.NoError(t, g.ReconfigureCommand("get", CommandConfig{Coalesce: true}))
	assert.True(t, g.commands.Load().names.get("get").settings.Load().coalesce)
	require.NoError(t, g.ReconfigureCommand("get", CommandConfig{}))
	assert.False(t, g.commands.Load().names.get("get").settings.Load().coalesce)
}

// TestCoalesceConservation: 16 goroutines make 4,000 calls over 4 keys,
// with Runs that succeed, fail or outlive their timeout, callers that
// leave, and waiters with short timeouts. Every call has exactly one
// primary outcome in the window, the COALESCED count is what the callers
// saw, every Run is counted once by the breaker, and nothing stays in
// flight.
func TestCoalesceConservation(t *testing.T) {
	never := circuit.Config{MinRequests: 1 << 30} // breakers that never trip: their windows hold every Run
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, MaxConcurrent: 100, Timeout: 50 * time.Millisecond,
		Breaker: never, CommandBreaker: never, Commands: map[string]CommandConfig{"get": {Coalesce: true}}})
	var runs atomic.Int64
	cmd := opFB[int]{op[int]{"get", func(ctx context.Context) (int, error) {
		n := runs.Add(1)
		switch n % 4 {
		case 0:
			return 0, errors.New("down")
		case 1:
			<-ctx.Done() // outlives its timeout
			return 0, ctx.Err()
		}
		time.Sleep(time.Millisecond)
		return int(n), nil
	}}, func(context.Context, error) (int, error) { return -1, nil }}
	const goroutines, each = 16, 250
	var coalesced atomic.Int64
	var wg sync.WaitGroup
	for w := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				ctx, cancel := context.WithCancel(context.Background())
				key := string(rune('a' + (w+i)%4))
				var opts []Option
				switch i % 5 {
				case 1:
					opts = append(opts, WithTimeout(time.Millisecond)) // a waiter that may time out
				case 2:
					time.AfterFunc(time.Millisecond, cancel) // a caller that leaves
				}
				_, info, _ := ExecuteInfo(ctx, g, keyedFB{cmd, key}, opts...)
				cancel()
				if info.Event == metrics.Coalesced {
					coalesced.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	c := g.commands.Load().names.get("get")
	waitFor(t, "every flight recorded", func() bool { return c.metrics.Counts(0).Calls() == goroutines*each })
	n := c.metrics.Counts(0)
	assert.EqualValues(t, goroutines*each, n.Attempts(), "one primary outcome per call")
	assert.Equal(t, coalesced.Load(), n[metrics.Coalesced])
	assert.Positive(t, n[metrics.Coalesced])
	h := c.breaker.Snapshot().Health
	assert.Equal(t, runs.Load(), h.Requests, "the breaker counted each Run once")
	assert.Zero(t, c.hot.inFlight.Load())
}

// TestCoalesceIgnoresTheRateLimitKey: two different requests of one
// caller (one WithKey, the caller's quota key) each run: WithKey is not a
// coalescing key, while the caller's quota still counts both.
func TestCoalesceIgnoresTheRateLimitKey(t *testing.T) {
	reg, clock := newTestRegistry(t)
	perKey, err := ratelimit.NewPerKey(ratelimit.PerKeyConfig{New: func(string) (ratelimit.Limiter, error) {
		return ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 1, Burst: 2, Clock: clock})
	}})
	require.NoError(t, err)
	g, err := reg.NewGroup("inbound", GroupConfig{Strategy: Semaphore, MaxConcurrent: 10, Timeout: NoTimeout,
		KeyedRateLimit: perKey, Commands: map[string]CommandConfig{"get": {Coalesce: true}}})
	require.NoError(t, err)
	dep := newGate()
	answers := make(chan int, 2)
	for _, v := range []int{1, 2} { // two requests of alice, for different things
		go func() {
			got, err := Execute(context.Background(), g, op[int]{"get", dep.run(v)}, WithKey("alice"))
			assert.NoError(t, err)
			answers <- got
		}()
	}
	defer func() { // a failed waitFor must not leave the Runs blocking the registry's Close
		select {
		case <-dep.open:
		default:
			close(dep.open)
		}
	}()
	waitFor(t, "both Runs", func() bool { return dep.runs.Load() == 2 })
	assert.Zero(t, waiting[int](g, "get", "alice"), "no flight under the caller's key")
	close(dep.open)
	assert.ElementsMatch(t, []int{1, 2}, []int{receive(t, answers, "an answer"), receive(t, answers, "an answer")},
		"each request its own answer")
	_, info, _ := ExecuteInfo(context.Background(), g, op[int]{"get", succeed(3)}, WithKey("alice"))
	assert.Equal(t, metrics.RateLimited, info.Event, "both requests used alice's burst of 2")
	assert.Zero(t, counts(t, g, "get")[metrics.Coalesced])
}
