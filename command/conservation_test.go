package command

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command/adaptive"
	"github.com/bulwark-go/bulwark/command/priority"
	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/command/throttle"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/ratelimit"
)

// The chaos tests drive two groups (pool and semaphore) with 64 goroutines
// making random calls: success, error, panic, runtime.Goexit, a Run that
// outlives its timeout (with a value or with a bad request), a caller that
// gives up, a bad request, an error whose IsBadRequest classifier panics;
// every command has a Discard that counts and often panics, and the live
// breakers' OnTransition panics; half the commands have a fallback that
// itself succeeds, fails or panics. Then what every caller saw
// must agree exactly with the rolling window (the manual clock never moves,
// so the window holds everything), the cumulative counters, the breakers'
// windows and the bulkheads' own counters.

const (
	chaosGoroutines = 64
	chaosCalls      = 200_000
)

type scenario uint8

const (
	scSuccess scenario = iota
	scError
	scPanic
	scTimeout
	scHung // answers successfully, but after its deadline
	scCancel
	scBadRequest
	scGoexit          // Run calls runtime.Goexit
	scLateBadRequest  // answers a bad request, but after its deadline
	scClassifierPanic // Run's error makes the group's IsBadRequest panic
	numScenarios
)

// expected is the primary outcome each scenario must produce when the call
// is admitted.
var expected = [numScenarios]metrics.Event{
	scSuccess: metrics.Success, scError: metrics.Failure, scPanic: metrics.Failure, scTimeout: metrics.Timeout,
	scHung: metrics.Timeout, scCancel: metrics.Cancelled, scBadRequest: metrics.BadRequest,
	scGoexit: metrics.Failure, scLateBadRequest: metrics.Timeout, scClassifierPanic: metrics.Failure,
}

func pickScenario(r *rand.Rand) scenario {
	switch n := r.IntN(100); {
	case n < 45:
		return scSuccess
	case n < 65:
		return scError
	case n < 70:
		return scPanic
	case n < 73:
		return scTimeout
	case n < 75:
		return scHung
	case n < 82:
		return scCancel
	case n < 85:
		return scGoexit
	case n < 87:
		return scLateBadRequest
	case n < 90:
		return scClassifierPanic
	default:
		return scBadRequest
	}
}

// callProbe is what one call's command saw: how many times Run started
// (more than once when retried), and how many times Discard got a value.
type callProbe struct {
	runs     atomic.Int32
	discards atomic.Int32
}

// valued reports whether Run returns a non-zero value in scenario sc (which
// Discard must get when the caller does not).
func valued(sc scenario) bool {
	return sc == scSuccess || sc == scError || sc == scHung
}

// chaosCmd behaves as its scenario says, the same way on every attempt.
type chaosCmd struct {
	sc     scenario
	cancel context.CancelFunc
	probe  *callProbe
	idem   bool // retried in a group with retries
}

func (c chaosCmd) Idempotent() bool { return c.idem }

var (
	errChaos         = errors.New("chaos: dependency error")
	errClassifyPanic = errors.New("chaos: this error makes IsBadRequest panic")
)

// Discard counts, and panics for every other value.
func (c chaosCmd) Discard(int) {
	if c.probe.discards.Add(1)%2 == 0 {
		panic("chaos: panic in Discard")
	}
}

func (c chaosCmd) Run(ctx context.Context) (int, error) {
	c.probe.runs.Add(1)
	switch c.sc {
	case scError:
		return 7, errChaos
	case scPanic:
		panic("chaos: panic in Run")
	case scTimeout:
		<-ctx.Done()
		return 0, ctx.Err()
	case scHung: // answers, but only after its deadline
		<-ctx.Done()
		time.Sleep(time.Millisecond)
		return 1, nil
	case scCancel:
		c.cancel()
		<-ctx.Done()
		return 0, ctx.Err()
	case scBadRequest:
		return 0, BadRequest(errChaos)
	case scGoexit:
		runtime.Goexit()
	case scLateBadRequest:
		<-ctx.Done()
		time.Sleep(time.Millisecond)
		return 0, BadRequest(errChaos)
	case scClassifierPanic:
		return 0, errClassifyPanic
	}
	return 1, nil
}

// chaosIsBadRequest is the groups' classifier: it panics for one error.
func chaosIsBadRequest(err error) bool {
	if errors.Is(err, errClassifyPanic) {
		panic("chaos: panic in IsBadRequest")
	}
	return false
}

// chaosOnTransition is the live breakers' observer: it always panics.
func chaosOnTransition(circuit.Transition) { panic("chaos: panic in OnTransition") }

// chaosFB adds a fallback that behaves as fb says: 0 succeeds, 1 fails, 2
// panics, 3 succeeds slowly.
type chaosFB struct {
	chaosCmd
	fb int
}

func (c chaosFB) Fallback(context.Context, error) (int, error) {
	switch c.fb {
	case 1:
		return 0, errors.New("chaos: fallback error")
	case 2:
		panic("chaos: panic in Fallback")
	case 3:
		time.Sleep(100 * time.Microsecond) // a slow fallback, so the fallback limit is reached
	}
	return -1, nil
}

// tally is what the callers of one command saw.
type tally struct {
	calls   int64          // attempts: one per call, more for a retried one
	callers int64          // calls of Execute
	events  metrics.Counts // every event of every Info, and the outcomes and RETRIED of retried attempts
}

type chaosResult struct {
	mu      sync.Mutex
	tallies map[string]*tally // by group/command
	calls   []chaosRecord
}

// chaosRecord keeps one call's probe and whether its caller got Run's value.
type chaosRecord struct {
	probe     *callProbe
	sc        scenario
	delivered bool
}

func (r *chaosResult) record(calls []chaosRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, calls...)
}

func (r *chaosResult) add(key string, t *tally) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sum := r.tallies[key]
	if sum == nil {
		sum = &tally{}
		r.tallies[key] = sum
	}
	sum.calls += t.calls
	sum.callers += t.callers
	for e := range sum.events {
		sum.events[e] += t.events[e]
	}
}

// runChaos makes calls calls from 64 goroutines over the groups and checks
// each call's Info on the spot; it returns what the callers saw.
func runChaos(t *testing.T, groups []*Group, calls int) *chaosResult {
	res := &chaosResult{tallies: map[string]*tally{}}
	var wg sync.WaitGroup
	for w := range chaosGoroutines {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 42))
			local := map[string]*tally{}
			var records []chaosRecord
			for i := 0; i < calls/chaosGoroutines; i++ {
				rec, ok := chaosCall(t, r, groups[r.IntN(len(groups))], local)
				if !ok {
					return
				}
				records = append(records, rec)
			}
			for k, v := range local {
				res.add(k, v)
			}
			res.record(records)
		})
	}
	wg.Wait()
	return res
}

func chaosCall(t *testing.T, r *rand.Rand, g *Group, local map[string]*tally) (chaosRecord, bool) {
	sc := pickScenario(r)
	name := fmt.Sprintf("cmd%d", r.IntN(4))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := []Option{WithName(name), WithPriority(priority.Level(r.IntN(int(numPriorities))))} // ignored by a group that does not shed
	if sc == scTimeout || sc == scHung || sc == scLateBadRequest {
		opts = append(opts, WithTimeout(time.Millisecond))
	}
	base := chaosCmd{sc: sc, cancel: cancel, probe: new(callProbe), idem: r.IntN(2) == 0}
	hasFB := r.IntN(2) == 0
	fb := r.IntN(4)
	var (
		v        int
		info     Info
		err      error
		returned bool
	)
	// On its own goroutine, because a Run that calls runtime.Goexit in a
	// Semaphore group ends the caller's goroutine: Execute never returns.
	done := make(chan struct{})
	go func() {
		defer close(done)
		if hasFB {
			v, info, err = ExecuteInfo(ctx, g, chaosFB{base, fb}, opts...)
		} else {
			v, info, err = ExecuteInfo(ctx, g, base, opts...)
		}
		returned = true
	}()
	<-done
	if !returned {
		// What the executor recorded for a call it never answered.
		if !assert.Equal(t, scGoexit, sc, "only a Goexit in Run keeps Execute from returning") ||
			!assert.Equal(t, g.sem != nil, true, "only on the caller's goroutine (Semaphore)") {
			return chaosRecord{}, false
		}
		info.Event, info.Events = metrics.Failure, metrics.SetOf(metrics.Failure, metrics.ExceptionThrown)
		err = errors.New("never returned")
	}
	rec := chaosRecord{probe: base.probe, sc: sc, delivered: returned && (err == nil && !info.Degraded || info.Event == metrics.BadRequest)}
	if sc == scLateBadRequest && returned {
		assert.False(t, IsBadRequest(err), "a late bad request is a TIMEOUT, not a bad request: %v", err)
	}

	// Per-call invariants.
	var primary []metrics.Event
	for e := range metrics.NumEvents {
		if isPrimary(e) && info.Events.Has(e) {
			primary = append(primary, e)
		}
	}
	ok := assert.Len(t, primary, 1, "exactly one primary outcome: %v", info.Events) &&
		assert.Equal(t, info.Event, primary[0]) &&
		assert.Contains(t, []metrics.Event{expected[sc], g.rejected, metrics.ShortCircuited, metrics.QueueTimeout, metrics.RateLimited, metrics.Throttled, metrics.PriorityRejected}, info.Event, "scenario %d", sc) &&
		assert.Equal(t, err != nil, info.Events.Has(metrics.ExceptionThrown), "EXCEPTION_THROWN iff error: %v", err) &&
		assert.Equal(t, info.Degraded, info.Events.Has(metrics.FallbackSuccess)) &&
		assert.Equal(t, info.Degraded, err == nil && v == -1, "a degraded call serves the fallback's value")
	if fallsBack(info.Event) && returned {
		fbEvents := 0
		for _, e := range []metrics.Event{metrics.FallbackSuccess, metrics.FallbackFailure, metrics.FallbackRejection, metrics.FallbackMissing} {
			if info.Events.Has(e) {
				fbEvents++
			}
		}
		ok = ok && assert.Equal(t, 1, fbEvents, "one fallback event: %v", info.Events)
		if !hasFB {
			ok = ok && assert.True(t, info.Events.Has(metrics.FallbackMissing))
		}
	}
	key := g.name + "/" + name
	tl := local[key]
	if tl == nil {
		tl = &tally{}
		local[key] = tl
	}
	// A retried attempt failed as its scenario says (each attempt behaves
	// the same, and only FAILURE and TIMEOUT are retried), and is RETRIED.
	retried := int64(max(info.Attempts, 1) - 1)
	tl.callers++
	tl.calls += 1 + retried
	tl.events[expected[sc]] += retried
	tl.events[metrics.Retried] += retried
	for e := range metrics.NumEvents {
		if info.Events.Has(e) {
			tl.events[e]++
		}
	}
	return rec, ok
}

// nthLimiter refuses every nth call of Admit and admits the others: its
// refusals depend on how many calls it saw, never on timing.
type nthLimiter struct {
	n     int64
	calls atomic.Int64
}

func (l *nthLimiter) Admit(context.Context) error {
	if l.calls.Add(1)%l.n == 0 {
		return ratelimit.ErrLimited
	}
	return nil
}

// checkDiscards checks that every non-zero value Run produced and no caller
// got (on any attempt) reached Discard exactly once, and no other did. Call
// it once the pool workers are idle.
func checkDiscards(t *testing.T, res *chaosResult) {
	var want, got int64
	for _, c := range res.calls {
		n := int64(0)
		if runs := int64(c.probe.runs.Load()); valued(c.sc) && runs > 0 {
			n = runs // every attempt's value, but the one delivered
			if c.delivered {
				n--
			}
		}
		want += n
		got += int64(c.probe.discards.Load())
		if !assert.Equal(t, n, int64(c.probe.discards.Load()), "scenario %d: discards", c.sc) {
			return
		}
	}
	assert.Positive(t, want, "the test reaches discarded values")
	t.Logf("%d values discarded", got)
}

// chaosRegistry returns the two chaos groups; rateLimit, if not nil, is
// each group's RateLimit.
func chaosRegistry(t *testing.T, breaker circuit.Config, rateLimit ratelimit.Limiter) []*Group {
	reg, _ := newTestRegistry(t)
	pool, err := reg.NewGroup("pool", GroupConfig{MaxConcurrent: 12, QueueSize: 4, FallbackLimit: 2, Timeout: 10 * time.Second,
		Breaker: breaker, CommandBreaker: breaker, IsBadRequest: chaosIsBadRequest, RateLimit: rateLimit})
	require.NoError(t, err)
	sem, err := reg.NewGroup("semaphore", GroupConfig{Strategy: Semaphore, MaxConcurrent: 8, FallbackLimit: 2, Timeout: 10 * time.Second,
		Breaker: breaker, CommandBreaker: breaker, IsBadRequest: chaosIsBadRequest, RateLimit: rateLimit})
	require.NoError(t, err)
	return []*Group{pool, sem}
}

// TestConservationUnderChaos: with breakers forced closed (nothing is
// short-circuited, every outcome still counted in their windows), every
// count agrees with what the callers saw, exactly.
func TestConservationUnderChaos(t *testing.T) {
	groups := chaosRegistry(t, circuit.Config{Mode: circuit.ForcedClosed}, nil)
	start := time.Now()
	res := runChaos(t, groups, chaosCalls)
	t.Logf("%d calls in %v", chaosCalls, time.Since(start))
	require.False(t, t.Failed())
	waitIdle(t, groups)
	checkDiscards(t, res)

	var total int64
	for _, g := range groups {
		now := g.clock.Now()
		var groupSeen metrics.Counts
		var groupHealth circuit.Health
		for name, c := range g.commands.Load().byName {
			seen := res.tallies[g.name+"/"+name]
			h := checkCommandCounts(t, g, name, c, seen, now)
			assert.Zero(t, c.hot.inFlight.Load())
			assert.Zero(t, c.hot.detached.Load(), "%s/%s: every detached call was counted back", g.name, name)
			assert.Zero(t, seen.events[metrics.ShortCircuited])
			addCounts(&groupSeen, seen.events)
			groupHealth.Requests += h.Requests
			groupHealth.Failures += h.Failures
			total += seen.calls
		}
		w := g.window(now)
		assert.Equal(t, groupSeen, w.Counts, "%s: group window", g.name)
		assert.Equal(t, groupSeen, w.Cumulative)
		gh := g.breaker.Snapshot().Health
		assert.Equal(t, groupHealth.Requests, gh.Requests, "%s: group breaker", g.name)
		assert.Equal(t, groupHealth.Failures, gh.Failures)

		bs := g.Snapshot().Bulkhead
		assert.Equal(t, groupSeen[g.rejected], bs.Rejected, "%s: bulkhead rejections", g.name)
		assert.Equal(t, groupSeen[metrics.FallbackRejection], g.fallback.Stats().Rejected, "%s: fallback rejections", g.name)
		assert.Positive(t, groupSeen[g.rejected], "%s: the test reaches rejections", g.name)
		assert.Positive(t, groupSeen[metrics.FallbackRejection], "%s: and fallback rejections", g.name)
		for _, e := range []metrics.Event{metrics.Success, metrics.Failure, metrics.Timeout, metrics.BadRequest, metrics.Cancelled,
			metrics.FallbackSuccess, metrics.FallbackFailure, metrics.FallbackMissing, metrics.ExceptionThrown} {
			assert.Positive(t, groupSeen[e], "%s: the test reaches %v", g.name, e)
		}
	}
	assert.Equal(t, int64(chaosCalls/chaosGoroutines*chaosGoroutines), total)
}

// checkCommandCounts checks that command name of g (state c) counted what
// its callers saw (seen) at instant now: its window and cumulative counts
// equal seen's events, each attempt has one primary outcome, and its breaker
// (forced closed, so it keeps every outcome) counted exactly the attempts
// that reached the dependency. It returns the breaker's health.
func checkCommandCounts(t *testing.T, g *Group, name string, c *commandState, seen *tally, now time.Duration) circuit.Health {
	t.Helper()
	require.NotNil(t, seen, name)
	assert.Equal(t, seen.events, c.metrics.Counts(now), "%s/%s: window == what callers saw", g.name, name)
	assert.Equal(t, seen.events, c.metrics.Cumulative(), "%s/%s: cumulative == what callers saw", g.name, name)
	assert.Equal(t, seen.calls, seen.events.Attempts(), "%s/%s: one primary outcome per attempt", g.name, name)
	h := c.breaker.Snapshot().Health
	reached := seen.events[metrics.Success] + seen.events[metrics.Failure] + seen.events[metrics.Timeout]
	assert.Equal(t, reached, h.Requests, "%s/%s: the breaker counts only attempts that reached the dependency", g.name, name)
	assert.Equal(t, seen.events[metrics.Failure], h.Failures, "%s/%s: breaker failures", g.name, name)
	assert.Equal(t, seen.events[metrics.Timeout], h.Timeouts, "%s/%s: breaker timeouts", g.name, name)
	return h
}

// TestBalanceWithLiveBreakers: with real breakers (which open, go half-open
// and close as the chaos goes), every call still has exactly one primary
// outcome, and the counts still agree with the callers.
func TestBalanceWithLiveBreakers(t *testing.T) {
	groups := chaosRegistry(t, circuit.Config{
		MinRequests:  20,
		FailureRatio: 0.3,
		OpenDuration: time.Millisecond,
		Clock:        metrics.SystemClock(),
		OnTransition: chaosOnTransition,
	}, nil)
	const calls = chaosCalls / 4
	res := runChaos(t, groups, calls)
	require.False(t, t.Failed())
	waitIdle(t, groups)
	checkDiscards(t, res)
	var total, shorted int64
	for key, seen := range res.tallies {
		assert.Equal(t, seen.calls, seen.events.Attempts(), "%s: sum of primary outcomes == calls", key)
		total += seen.calls
		shorted += seen.events[metrics.ShortCircuited]
	}
	for _, g := range groups {
		for name, c := range g.commands.Load().byName {
			assert.Equal(t, res.tallies[g.name+"/"+name].events, c.metrics.Cumulative(), "%s/%s", g.name, name)
		}
	}
	assert.Equal(t, int64(calls/chaosGoroutines*chaosGoroutines), total)
	assert.Positive(t, shorted, "the breakers did open")
}

// chaosRefusals runs the chaos of calls calls in groups, waits until they
// are idle, checks the discards and every command's counts against what its
// callers saw, and returns the calls made and how many of them ended in
// refusal, which the test asserts on.
func chaosRefusals(t *testing.T, groups []*Group, calls int, refusal metrics.Event) (total, refused int64) {
	t.Helper()
	res := runChaos(t, groups, calls)
	require.False(t, t.Failed())
	waitIdle(t, groups)
	checkDiscards(t, res)
	for _, g := range groups {
		now := g.clock.Now()
		for name, c := range g.commands.Load().byName {
			seen := res.tallies[g.name+"/"+name]
			checkCommandCounts(t, g, name, c, seen, now)
			total += seen.calls
			refused += seen.events[refusal]
		}
	}
	assert.Equal(t, int64(calls/chaosGoroutines*chaosGoroutines), total)
	return total, refused
}

// waitIdle waits until the detached calls of the pool groups have returned,
// so that no test leaves a worker behind.
func waitIdle(t *testing.T, groups []*Group) {
	require.Eventually(t, func() bool {
		for _, g := range groups {
			if g.hot.running.Load() != 0 {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond)
}

// TestConservationWithFeaturesAtOnce: the chaos in groups with a rate limit
// in front, retries, the throttle, priority shedding and the adaptive limit
// all on at once (and the manual clock moving, so the adaptive limit's
// windows close): every count still agrees with what the callers saw, and
// each refusal kind happened. Hedging is left out: its extra attempts end
// CANCELLED or HEDGED, which the chaos tally does not model
// (TestConservationWithHedges checks it on its own).
func TestConservationWithFeaturesAtOnce(t *testing.T) {
	groups := chaosRegistry(t, circuit.Config{Mode: circuit.ForcedClosed}, &nthLimiter{n: 7})
	for _, g := range groups {
		require.NoError(t, g.Reconfigure(changed(g, func(c *GroupConfig) {
			c.Retry = retry.Config{MaxAttempts: 3, Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}
			c.Throttle = throttle.Config{K: 2}
			c.Priority.Reserve = [numPriorities]float64{0, 0.25, 0.5, 0.75}
			c.Adaptive = adaptive.Config{Min: 2, Max: c.MaxConcurrent, Window: time.Millisecond}
		})))
	}
	clock := groups[0].clock.(*metrics.ManualClock)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for range 2_000_000 { // at most 2 s: within the windows the checks read
			select {
			case <-stop:
				return
			default:
				clock.Advance(time.Microsecond)
				runtime.Gosched()
			}
		}
	}()
	res := runChaos(t, groups, chaosCalls/8)
	close(stop)
	<-stopped
	require.False(t, t.Failed())
	waitIdle(t, groups)
	checkDiscards(t, res)
	var seenAll metrics.Counts
	var callers int64
	for _, g := range groups {
		now := g.clock.Now()
		for name, c := range g.commands.Load().byName {
			seen := res.tallies[g.name+"/"+name]
			checkCommandCounts(t, g, name, c, seen, now)
			addCounts(&seenAll, seen.events)
			callers += seen.callers
		}
		s := g.Snapshot()
		assert.Equal(t, s.Adaptive.Limit, s.Bulkhead.Capacity, "%s: the adaptive limit sizes the bulkhead", g.name)
	}
	assert.Equal(t, int64(chaosCalls/8/chaosGoroutines*chaosGoroutines), callers)
	for _, e := range []metrics.Event{metrics.RateLimited, metrics.Retried, metrics.Throttled, metrics.PriorityRejected} {
		assert.Positive(t, seenAll[e], "the test reaches %v", e)
	}
	t.Logf("%d calls: %d rate limited, %d retried, %d throttled, %d shed, %d semaphore and %d pool rejections", callers,
		seenAll[metrics.RateLimited], seenAll[metrics.Retried], seenAll[metrics.Throttled], seenAll[metrics.PriorityRejected],
		seenAll[metrics.SemaphoreRejected], seenAll[metrics.ThreadPoolRejected])
}
