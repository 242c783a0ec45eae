package command

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/bulwark-go/bulwark/command/hedge"
	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/internal/breaker"
	"github.com/bulwark-go/bulwark/metrics"
)

// defaultHedgeBudgetRatio is hedge.Config.BudgetRatio's default.
const defaultHedgeBudgetRatio = 0.05

// hedgeOn reports whether c turns hedging on.
func hedgeOn(c hedge.Config) bool { return c.MaxHedges > 0 }

// hedgeDefaults returns c with its zero fields defaulted, when hedging is
// on.
func hedgeDefaults(c hedge.Config) hedge.Config {
	if !hedgeOn(c) {
		return c
	}
	if c.BudgetRatio == 0 {
		c.BudgetRatio = defaultHedgeBudgetRatio
	}
	if c.Sleep == nil {
		c.Sleep = sleep
	}
	return c
}

// validateHedge reports the first invalid field of c (defaults applied),
// named as the Hedge of the command name's.
func validateHedge(c hedge.Config, name string) error {
	switch {
	case c.MaxHedges < 0 || c.MaxHedges > maxRetryAttempts-1:
		return invalid("Commands[%q].Hedge.MaxHedges %d must be between 0 and %d (0: no hedging)", name, c.MaxHedges, maxRetryAttempts-1)
	case !hedgeOn(c):
		return nil
	case c.Percentile == 0 && c.Delay <= 0:
		return invalid("Commands[%q].Hedge.Delay %v must be positive (or set Percentile)", name, c.Delay)
	case c.Percentile != 0 && hedgeQuantile(c.Percentile) < 0:
		return invalid("Commands[%q].Hedge.Percentile %v must be one of 25, 50, 75, 90, 95, 99, 99.5 (or 0 for Delay)", name, c.Percentile)
	case c.Percentile != 0 && c.MinDelay < 0:
		return invalid("Commands[%q].Hedge.MinDelay %v must not be negative", name, c.MinDelay)
	case c.Percentile != 0 && (c.MaxDelay <= 0 || c.MaxDelay < c.MinDelay):
		return invalid("Commands[%q].Hedge.MaxDelay %v must be positive and not below MinDelay %v", name, c.MaxDelay, c.MinDelay)
	case !(c.BudgetRatio > 0 && c.BudgetRatio <= 1):
		return invalid("Commands[%q].Hedge.BudgetRatio %v must be in (0, 1]", name, c.BudgetRatio)
	}
	return nil
}

// hedgeQuantile returns the index of percentile p in metrics.Quantiles(),
// or -1 if the window keeps no such percentile (p0 and p100, the minimum
// and the maximum, are not delays).
func hedgeQuantile(p float64) int {
	q := metrics.Quantiles()
	i := slices.Index(q[:], p)
	if i == 0 || i == len(q)-1 {
		return -1
	}
	return i
}

// hedgeDelay is a command's Percentile delay, read from its window at most
// once per bucket (a snapshot passes over every histogram bin).
type hedgeDelay struct {
	mu  sync.Mutex
	at  time.Duration // when d was read; valid when set
	d   time.Duration
	set bool
}

// race is the attempts of one hedged call: each hands itself to the caller
// through results when it ends, until the caller has its answer (over);
// then the attempt records itself as HEDGED (lost).
type race[T any, C Runner[T]] struct {
	mu      sync.Mutex
	over    bool
	results chan *commandCall[T, C] // room for every attempt: a send never blocks
}

// hedge is the attempt of a call of a command that hedges
// (CommandConfig.Hedge), after the limiters: limited hands it the attempt,
// so that a call without hedging pays nothing for it. It admits the attempt
// (both breakers) and makes it; it reports false: the attempt goes on at
// record, as one that a stage refused does, whatever its outcome.
//
// An attempt that is a half-open probe, goes to a warming instance, or of a
// command that is not Idempotent is made as any (isolate, classify). Any
// other runs on a goroutine of its own, and the caller waits for it; while
// it goes unanswered for the delay, and the breakers are both closed, and
// the budget allows (see hedge.Config), the caller starts another attempt of
// the call beside it, up to MaxHedges more, each through both breakers and
// the bulkhead, with what is left of the first attempt's timeout. The first
// attempt to succeed (or to end as BAD_REQUEST) is the call's attempt, as
// is the last one running if all fail; every other attempt is cancelled,
// and recorded on its own when it ends, with its own outcome, in the
// breakers and the command's metrics, with HEDGED (lost); a value it
// returns goes to Discard.
func (k *commandCall[T, C]) hedge() bool {
	if !k.admit() {
		return false
	}
	hc := k.cs.hedge
	if k.judge || !k.g.idempotent(any(k.cmd)) {
		k.classify(k.isolate())
		return false
	}
	ctx, cancel := context.WithCancel(k.ctx)
	defer cancel()
	rc := &race[T, C]{results: make(chan *commandCall[T, C], hc.MaxHedges+1)}
	first := &commandCall[T, C]{call: k.call, cmd: k.cmd}
	first.ctx = ctx
	k.gp, k.cp = breaker.Permit{}, breaker.Permit{} // the first attempt's, recorded by whoever ends it
	delay := k.hedgeDelay(hc)
	wake := make(chan struct{}, 1)
	disarm := k.arm(ctx, hc, delay, wake) // before Run starts: a Run that starts knows the budget's answer
	go first.run(rc)
	running, made := 1, 0
	for {
		select {
		case a := <-rc.results:
			running--
			if a.failed() && running > 0 {
				a.lost()
				continue
			}
			if disarm != nil {
				disarm()
				k.g.retries.pending.Add(-1) // the hedge armed is not made
			}
			k.answer(rc, a, made)
			return false
		case <-wake:
			disarm = nil
			if !k.launch(ctx, rc) {
				k.g.retries.pending.Add(-1) // and no more hedges: the breakers or the deadline forbid them
				continue
			}
			running++
			made++
			if made < hc.MaxHedges {
				disarm = k.arm(ctx, hc, delay, wake)
			}
		}
	}
}

// arm schedules the next hedge of the call, delay from now, if the group's
// budget has room for it (then it is pending there until recorded, or until
// disarmed): it returns the function that calls it off, or nil if the
// budget has no room. The hedge's wake-up comes on wake.
func (k *call) arm(ctx context.Context, hc *hedge.Config, delay time.Duration, wake chan<- struct{}) context.CancelFunc {
	budget := retry.Config{BudgetRatio: hc.BudgetRatio, BudgetMinPerSecond: defaultRetryBudgetMinRate}
	if !k.g.retries.admit(k.g, &budget, k.g.clock.Now()) {
		return nil
	}
	sctx, stop := context.WithCancel(ctx)
	go func() {
		if hc.Sleep(sctx, delay) == nil {
			wake <- struct{}{}
		}
		stop()
	}()
	return stop
}

// hedgeDelay returns the delay before a hedge of the call: hedge.Config's
// Delay, or its Percentile of the command's Run latency, clamped.
func (k *call) hedgeDelay(hc *hedge.Config) time.Duration {
	if hc.Percentile == 0 {
		return hc.Delay
	}
	c, now := k.c, k.t0
	hd := &c.hedged
	hd.mu.Lock()
	defer hd.mu.Unlock()
	w := c.metrics.Window()
	if !hd.set || now < hd.at || now-hd.at >= w.Length/time.Duration(w.Buckets) {
		d := hc.MaxDelay
		if s := c.metrics.Snapshot(now); s.Run.Count > 0 {
			d = min(max(s.Run.Percentiles[hedgeQuantile(hc.Percentile)], hc.MinDelay), hc.MaxDelay)
		}
		hd.at, hd.d, hd.set = now, d, true
	}
	return hd.d
}

// launch starts a hedge of the call k beside the attempts in rc, if its
// context is live, both breakers are closed and admit it (not as a
// probe), and some of the first attempt's timeout is left; it reports
// whether it did.
func (k *commandCall[T, C]) launch(ctx context.Context, rc *race[T, C]) bool {
	g := k.g
	now := g.clock.Now()
	if ctx.Err() != nil || engine(g.breaker).State() != breaker.Closed || engine(k.c.breaker).State() != breaker.Closed {
		return false
	}
	h := &commandCall[T, C]{call: k.call, cmd: k.cmd}
	h.ctx = ctx
	h.attempt = attempt{start: now, t0: now, now: now}
	if h.timeout > 0 {
		if h.timeout -= now - k.t0; h.timeout <= 0 {
			return false
		}
	}
	if !h.admit() || h.judge {
		h.r = result{event: metrics.Cancelled} // give back what admit took, uncounted
		h.record()
		return false
	}
	go h.run(rc)
	return true
}

// run makes the attempt a of a hedged call on its own goroutine and hands
// it to the caller, or records it as lost if the caller has its answer. If
// Run calls runtime.Goexit (Semaphore: on this goroutine), the attempt is
// handed on as a FAILURE all the same, so that the caller is answered.
func (a *commandCall[T, C]) run(rc *race[T, C]) {
	ran := false
	defer func() {
		if !ran { // goexit has closed the books of a call: this attempt is not one
			a.c.hot.inFlight.Add(1)
			a.gp, a.cp = breaker.Permit{}, breaker.Permit{}
			a.r = result{event: metrics.Failure, err: errGoexit}
			a.end(rc)
		}
	}()
	a.classify(a.isolate())
	ran = true
	a.end(rc)
}

// end hands the ended attempt a to the caller, unless it has its answer:
// then a is lost.
func (a *commandCall[T, C]) end(rc *race[T, C]) {
	rc.mu.Lock()
	if !rc.over {
		rc.results <- a
		rc.mu.Unlock()
		return
	}
	rc.mu.Unlock()
	a.lost()
}

// answer makes the ended attempt a the call's (k's), of the made hedges
// beside the first: the race is over, and every other attempt that has
// ended is lost; the ones still running are cancelled when hedge returns,
// and are lost when they end. The call keeps its own start: its latency
// counts from it.
func (k *commandCall[T, C]) answer(rc *race[T, C], a *commandCall[T, C], made int) {
	rc.mu.Lock()
	rc.over = true
	rc.mu.Unlock()
	for len(rc.results) > 0 {
		(<-rc.results).lost()
	}
	start := k.start
	k.attempt, k.v = a.attempt, a.v
	k.start = start
	k.attempts += int32(made)
}

// lost records the attempt a of a hedged call whose answer the caller did
// not take: its outcome in both breakers (record), and in the command's
// metrics with HEDGED, an attempt of its own that metrics.Counts.Calls
// does not count as a call; it is then no longer pending in the group's budget. A value it
// returned goes to Discard.
func (a *commandCall[T, C]) lost() {
	a.record()
	a.events.Add(metrics.Hedged)
	run := metrics.NoLatency
	if a.r.ran {
		run = a.r.run
	}
	a.c.metrics.Record(a.now, a.events, run, a.now-a.start)
	a.g.retries.pending.Add(-1)
	if !a.failed() {
		discard(a.g, &a.cmd, a.v)
	}
}
