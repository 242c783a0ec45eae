package main

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/hedge"
	"github.com/bulwark-go/bulwark/metrics"
)

// HedgeParams describes the hedge scenario: a replicated dependency with a
// long tail, offered Rate calls a second, evenly spaced, through a
// Semaphore group (circuit's default breakers, no timeout), each call a
// real command.ExecuteInfo of an Idempotent command. Each attempt answers
// after a draw from [Median−Jitter, Median+Jitter], times TailFactor for
// a TailShare of the attempts, drawn from (Seed, call, attempt) alone, so
// that a hedge draws afresh and no draw depends on the order goroutines
// ran in.
//
// The tail runs last Duration and compare no hedge, a hedge after the
// command's Percentile Run latency clamped to [MinDelay, MaxDelay], and a
// hedge after a fixed Delay (MaxHedges 1, the default BudgetRatio 0.05).
// The outage runs last OutageRun: the dependency has the same tail, and
// from OutageStart to OutageEnd every attempt it starts fails, after
// SlowFailure (a slow outage) or after its usual draw (an erroring
// outage); they count the hedges started during the outage, before the
// breakers opened and while one was open or half-open.
//
// Determinism: the scenario drives the library's goroutines one event at
// a time. Each Run and each hedge.Config.Sleep reports itself to the
// driver and waits until the driver ends it at its virtual end (a Run
// whose context is cancelled, a hedge's loser, reports that and waits
// for the driver to let it return at the same instant; a Sleep whose call
// was answered returns at once, which moves nothing the library reads).
// After each event the driver waits until every other goroutine of the
// process is blocked (it reads their states in runtime.Stack), then takes
// the reports, sorted by (call, attempt), and schedules their ends; events
// at one instant run in the order (call, attempt), a Run's end before the
// hedge its delay would start. So two runs give the same figures. Limits:
// the quiescence test needs the process to itself (a goroutine running
// elsewhere only makes it wait); a hedge's loser returns at its
// cancellation's instant, as a client that drops the request does, while
// a real dependency may go on working on it; latency is the virtual
// clock's, with no CPU time.
type HedgeParams struct {
	Rate           float64       // calls a second, evenly spaced
	Duration       time.Duration // length of each tail run
	Median, Jitter time.Duration // an attempt's usual answer time: Median ± Jitter, uniform
	TailShare      float64       // share of the attempts in the tail
	TailFactor     float64       // a tail attempt's answer time over its usual one
	Percentile     float64       // the percentile hedge's hedge.Config.Percentile
	MinDelay       time.Duration // its MinDelay
	MaxDelay       time.Duration // its MaxDelay
	Delay          time.Duration // the fixed hedge's hedge.Config.Delay
	OutageRun      time.Duration // length of each outage run
	OutageStart    time.Duration // the outage, in the outage runs
	OutageEnd      time.Duration
	SlowFailure    time.Duration // a failing attempt's answer time in the slow outage
	Seed           uint64        // seed of the latency draws
}

// DefaultHedgeParams returns the hedge scenario's defaults: 200 calls a
// second for 60 s; attempts answer after 10 ms ± 1 ms, 2% of them after
// 20 times that; a p95 hedge clamped to [5 ms, 100 ms] and a 15 ms one;
// outage runs of 30 s with an outage from 10 s to 20 s, slow failures
// after 1 s.
func DefaultHedgeParams() HedgeParams {
	return HedgeParams{Rate: 200, Duration: time.Minute, Median: 10 * time.Millisecond, Jitter: time.Millisecond,
		TailShare: 0.02, TailFactor: 20, Percentile: 95, MinDelay: 5 * time.Millisecond, MaxDelay: 100 * time.Millisecond,
		Delay: 15 * time.Millisecond, OutageRun: 30 * time.Second, OutageStart: 10 * time.Second, OutageEnd: 20 * time.Second,
		SlowFailure: time.Second, Seed: 1}
}

func (p HedgeParams) validate() error {
	switch {
	case p.Duration <= 0:
		return usage("-duration %v must be positive", p.Duration)
	case p.Rate*max(p.Duration, p.OutageRun).Seconds() > 1_000_000:
		return usage("-duration %v: more than 1,000,000 calls", p.Duration)
	}
	return nil
}

// The hedge scenario's modes and outages.
const (
	hedgeOff     = "no hedge"
	hedgePercent = "hedge p%g"
	hedgeFixed   = "hedge %v"
	outageNone   = ""
	outageSlow   = "slow"
	outageErrors = "errors"
)

// HedgeResult is what one run of the hedge scenario measured.
type HedgeResult struct {
	Mode, Outage       string
	Calls              int           // calls made
	Attempts           int           // Runs started, hedges included
	Hedges             int           // hedges started (Runs beyond a call's first)
	Success            int           // calls answered without error
	Hedged             int64         // the command's HEDGED count
	P50, P90, P99, Max time.Duration // the callers' latency
	// The outage runs only: calls started during the outage (and of
	// them before the first breaker opened), the attempts and hedges they
	// started, the hedges started before the first breaker opened and
	// while one was open or half-open, and when the first opened (from
	// the outage's start; -1: never).
	OutageCalls, CallsBeforeOpen, OutageAttempts, OutageHedges int
	HedgesBeforeOpen, HedgesWhileNotClosed                     int
	OpenedAfter                                                time.Duration
}

// ExtraLoad returns the hedges started per call.
func (r HedgeResult) ExtraLoad() float64 { return float64(r.Hedges) / float64(r.Calls) }

// OutageExtraLoad returns the hedges started per call during the outage.
func (r HedgeResult) OutageExtraLoad() float64 {
	return float64(r.OutageHedges) / float64(r.OutageCalls)
}

// ExtraLoadBeforeOpen returns the hedges started before the first
// breaker opened per call started in the outage before then.
func (r HedgeResult) ExtraLoadBeforeOpen() float64 {
	return float64(r.HedgesBeforeOpen) / float64(r.CallsBeforeOpen)
}

// SimulateHedge runs the tail runs, then the outage runs: without a hedge
// and with the percentile hedge, in the slow outage, then in the erroring
// one.
func SimulateHedge(p HedgeParams) (tail, outage []HedgeResult, err error) {
	if err := p.validate(); err != nil {
		return nil, nil, err
	}
	off := hedge.Config{}
	percent := hedge.Config{MaxHedges: 1, Percentile: p.Percentile, MinDelay: p.MinDelay, MaxDelay: p.MaxDelay}
	fixed := hedge.Config{MaxHedges: 1, Delay: p.Delay}
	type run struct {
		mode   string
		hc     hedge.Config
		outage string
		out    *[]HedgeResult
	}
	pctName, fixedName := fmt.Sprintf(hedgePercent, p.Percentile), fmt.Sprintf(hedgeFixed, p.Delay)
	runs := []run{{hedgeOff, off, outageNone, &tail}, {pctName, percent, outageNone, &tail}, {fixedName, fixed, outageNone, &tail},
		{hedgeOff, off, outageSlow, &outage}, {pctName, percent, outageSlow, &outage},
		{hedgeOff, off, outageErrors, &outage}, {pctName, percent, outageErrors, &outage}}
	for _, r := range runs {
		res, err := p.replay(r.mode, r.hc, r.outage)
		if err != nil {
			return nil, nil, err
		}
		*r.out = append(*r.out, res)
	}
	return tail, outage, nil
}

// errReplicaDown is the dependency's answer during the outage.
var errReplicaDown = errors.New("replica down")

// errAborted ends a Run or a Sleep still waiting when a run ends on an
// error.
var errAborted = errors.New("hedge: run aborted")

// reqKey keys a call's number in its context: a hedge's Sleep reads it.
type reqKey struct{}

// Reports to the driver, in the order the driver handles those of one
// instant's event.
const (
	repRun       = iota // a Run started
	repCancelled        // a Run's context ended
	repSleep            // a hedge's Sleep started
	repSlept            // a Sleep's context ended
	repAnswered         // a call was answered
)

// report is what a goroutine of the scenario tells the driver.
type report struct {
	kind    int
	call    int
	attempt int // its wait's (none for an answer)
	w       *wait
	d       time.Duration // a Sleep's delay
	info    command.Info
	err     error
}

// wait is a Run or a Sleep waiting for the driver: it returns err when
// release is closed.
type wait struct {
	release chan struct{}
	attempt int // the Run's; the Sleep's: the attempt its hedge would be
	err     error
	over    bool // the driver's: it ended early (its end event is void)
}

// tailSim is one run's state shared by the driver and the goroutines.
type tailSim struct {
	mu       sync.Mutex
	reports  []report
	reported chan struct{} // a report came (room for one)
	abort    chan struct{} // closed when the run ends: a Run or Sleep still waiting returns
	attempts map[int]int   // Runs started per call (under mu)
	states   map[string]circuit.State
}

func (s *tailSim) report(r report) {
	s.mu.Lock()
	switch r.kind {
	case repRun:
		r.w.attempt = s.attempts[r.call]
		s.attempts[r.call]++
	case repSleep:
		r.w.attempt = s.attempts[r.call]
	}
	if r.w != nil {
		r.attempt = r.w.attempt
	}
	s.reports = append(s.reports, r)
	s.mu.Unlock()
	select {
	case s.reported <- struct{}{}:
	default:
	}
}

// lookup is the command: one idempotent read of call's data.
type lookup struct {
	call int
	s    *tailSim
}

func (lookup) Name() string     { return "lookup" }
func (lookup) Idempotent() bool { return true }
func (l lookup) Run(ctx context.Context) (int, error) {
	w := &wait{release: make(chan struct{})}
	l.s.report(report{kind: repRun, call: l.call, w: w})
	select {
	case <-w.release:
		return l.call, w.err
	case <-ctx.Done():
		l.s.report(report{kind: repCancelled, call: l.call, w: w})
		select {
		case <-w.release:
		case <-l.s.abort:
		}
		return 0, ctx.Err()
	case <-l.s.abort:
		return 0, errAborted
	}
}

// sleep is the hedges' hedge.Config.Sleep.
func (s *tailSim) sleep(ctx context.Context, d time.Duration) error {
	w := &wait{release: make(chan struct{})}
	call := ctx.Value(reqKey{}).(int)
	s.report(report{kind: repSleep, call: call, d: d, w: w})
	select {
	case <-w.release:
		return nil
	case <-ctx.Done():
		s.report(report{kind: repSlept, call: call, w: w})
		return ctx.Err()
	case <-s.abort:
		return errAborted
	}
}

// Driver events, in their order at one instant for one (call, attempt).
const (
	evRunEnd   = iota // a Run ends
	evSleepEnd        // a Sleep ends
	evRelease         // a cancelled Run returns
	evStart           // a call starts
)

// tailEvent is one of the driver's events.
type tailEvent struct {
	at            time.Duration
	call, attempt int
	kind          int
	w             *wait
}

// tailQueue is a min-heap of events by (at, call, attempt, kind).
type tailQueue []tailEvent

func (q tailQueue) Len() int { return len(q) }
func (q tailQueue) Less(i, j int) bool {
	a, b := q[i], q[j]
	return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.call, b.call), cmp.Compare(a.attempt, b.attempt), cmp.Compare(a.kind, b.kind)) < 0
}
func (q tailQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *tailQueue) Push(x any)   { *q = append(*q, x.(tailEvent)) }
func (q *tailQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// latency returns the answer time of attempt a of call c.
func (p HedgeParams) latency(c, a int) time.Duration {
	r := rand.New(rand.NewPCG(p.Seed, uint64(c)<<8|uint64(a)))
	d := float64(p.Median) + (2*r.Float64()-1)*float64(p.Jitter)
	if r.Float64() < p.TailShare {
		d *= p.TailFactor
	}
	return time.Duration(d).Round(time.Microsecond)
}

// replay runs the scenario once: hedging hc (off if MaxHedges is 0), in
// outage ("" for the tail runs).
func (p HedgeParams) replay(mode string, hc hedge.Config, outage string) (HedgeResult, error) {
	res := HedgeResult{Mode: mode, Outage: outage, OpenedAfter: -1}
	clock := new(metrics.ManualClock)
	s := &tailSim{attempts: map[int]int{}, states: map[string]circuit.State{}, reported: make(chan struct{}, 1),
		abort: make(chan struct{})}
	opened := time.Duration(-1)
	onTransition := func(t circuit.Transition) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.states[t.Name] = t.To
		if t.To == circuit.Open && opened < 0 && outage != outageNone && t.At >= p.OutageStart {
			opened = t.At
		}
	}
	if hc.MaxHedges > 0 {
		hc.Sleep = s.sleep
	}
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	defer func() { _ = reg.Close(context.Background()) }()
	defer close(s.abort) // after an error, before Close waits for the calls in flight
	g, err := reg.NewGroup("replicas", command.GroupConfig{Strategy: command.Semaphore, MaxConcurrent: 100_000,
		Timeout: command.NoTimeout, Breaker: circuit.Config{OnTransition: onTransition},
		CommandBreaker: circuit.Config{OnTransition: onTransition},
		Commands:       map[string]command.CommandConfig{"lookup": {Hedge: hc}}})
	if err != nil {
		return res, fmt.Errorf("%w: %w", errUsage, err)
	}
	length, inOutage := p.Duration, func(time.Duration) bool { return false }
	if outage != outageNone {
		length = p.OutageRun
		inOutage = func(t time.Duration) bool { return t >= p.OutageStart && t < p.OutageEnd }
	}
	q := &tailQueue{}
	n := int(p.Rate * length.Seconds())
	for i := range n {
		heap.Push(q, tailEvent{at: time.Duration(float64(i) * float64(time.Second) / p.Rate), call: i, attempt: -1, kind: evStart})
	}
	startedAt := make([]time.Duration, n)
	running := map[int]int{} // Runs not ended nor cancelled, by call
	var latencies []time.Duration
	q0 := newQuiescence()
	for q.Len() > 0 {
		e := heap.Pop(q).(tailEvent)
		if e.w != nil && e.w.over {
			continue
		}
		clock.Set(e.at)
		// expect tells whether the event makes a report for sure: a call
		// starts a Run or is answered; a Run's end answers the call, but
		// for a failure beside another attempt of the call still running.
		expect := false
		select {
		case <-s.reported:
		default:
		}
		switch e.kind {
		case evStart:
			startedAt[e.call] = e.at
			ctx := context.WithValue(context.Background(), reqKey{}, e.call)
			go func(call int) {
				_, info, err := command.ExecuteInfo(ctx, g, lookup{call, s})
				s.report(report{kind: repAnswered, call: call, info: info, err: err})
			}(e.call)
			res.Calls++
			if inOutage(e.at) {
				res.OutageCalls++
				s.mu.Lock()
				if opened < 0 {
					res.CallsBeforeOpen++
				}
				s.mu.Unlock()
			}
			expect = true
		case evRunEnd:
			running[e.call]--
			expect = e.w.err == nil || running[e.call] == 0
			close(e.w.release)
		default:
			close(e.w.release)
		}
		if expect {
			if _, err := receive(s.reported, "Run started nor call answered"); err != nil {
				return res, fmt.Errorf("hedge: %w", err)
			}
		}
		if err := q0.wait(); err != nil {
			return res, err
		}
		s.mu.Lock()
		reps := s.reports
		s.reports = nil
		slices.SortStableFunc(reps, func(a, b report) int {
			return cmp.Or(cmp.Compare(a.call, b.call), cmp.Compare(a.attempt, b.attempt), cmp.Compare(a.kind, b.kind))
		})
		nc, op := false, opened // a breaker is not closed; when the first opened
		for _, st := range s.states {
			nc = nc || st != circuit.Closed
		}
		s.mu.Unlock()
		now := clock.Now()
		for _, r := range reps {
			switch r.kind {
			case repRun:
				res.Attempts++
				during := inOutage(startedAt[r.call])
				if during {
					res.OutageAttempts++
				}
				if r.attempt > 0 {
					res.Hedges++
					if during {
						res.OutageHedges++
						switch {
						case nc:
							res.HedgesWhileNotClosed++
						case op < 0:
							res.HedgesBeforeOpen++
						}
					}
				}
				d := p.latency(r.call, r.attempt)
				if inOutage(now) {
					r.w.err = errReplicaDown
					if outage == outageSlow {
						d = p.SlowFailure
					}
				}
				running[r.call]++
				heap.Push(q, tailEvent{at: now + d, call: r.call, attempt: r.attempt, kind: evRunEnd, w: r.w})
			case repCancelled:
				r.w.over = true
				running[r.call]--
				heap.Push(q, tailEvent{at: now, call: r.call, attempt: r.attempt, kind: evRelease, w: &wait{release: r.w.release}})
			case repSleep:
				heap.Push(q, tailEvent{at: now + r.d, call: r.call, attempt: r.attempt, kind: evSleepEnd, w: r.w})
			case repSlept:
				r.w.over = true
			case repAnswered:
				delete(running, r.call)
				latencies = append(latencies, r.info.Latency)
				if r.err == nil {
					res.Success++
				}
			}
		}
	}
	if len(latencies) != n {
		return res, fmt.Errorf("hedge: %d calls answered of %d", len(latencies), n)
	}
	if opened >= 0 {
		res.OpenedAfter = opened - p.OutageStart
	}
	res.Hedged = g.Snapshot().Commands[0].Metrics.Cumulative[metrics.Hedged]
	slices.Sort(latencies)
	res.P50, res.P90, res.P99, res.Max = percentile(latencies, 50), percentile(latencies, 90), percentile(latencies, 99), latencies[n-1]
	return res, nil
}

// quiescence tells when every goroutine of the process but the caller's
// is blocked: waiting on a channel, a lock, a timer or the network (the
// states of blocked, listed below), as runtime.Stack shows them. Any
// other state, running, runnable, in a system call (but the ones os/signal
// and a CPU profile keep waiting there), preempted, waiting for the
// garbage collector or on one of the runtime's own semaphores, means a
// goroutine that goes on by itself.
type quiescence struct{ buf []byte }

// blocked is the goroutine states (runtime.Stack's wait reasons) that
// only another goroutine, a timer or the network ends. "semacquire" is not
// one: it is the state of a goroutine that allocates while the runtime
// starts a garbage collection or stops the world (runtime.Stack's own stop
// of this very test among them), and which goes on by itself once the
// runtime lets it. Counted as blocked, it let the driver take the
// goroutines for settled and go on to the next event, moving the clock,
// while one of them was still on its way (seen in tailSim.report's append
// and in a context's Done). sync's locks and WaitGroup have wait reasons
// of their own.
var blocked = map[string]bool{"chan receive": true, "chan send": true, "chan receive (nil chan)": true,
	"chan send (nil chan)": true, "select": true, "select (no cases)": true, "sync.Mutex.Lock": true,
	"sync.RWMutex.RLock": true, "sync.RWMutex.Lock": true, "sync.WaitGroup.Wait": true, "sync.Cond.Wait": true,
	"sleep": true, "IO wait": true, "finalizer wait": true, "cleanup wait": true}

func newQuiescence() *quiescence { return &quiescence{buf: make([]byte, 1<<16)} }

// wait returns once every other goroutine is blocked, or an error if they
// are not within 10 s.
func (q *quiescence) wait() error {
	deadline := time.Now().Add(10 * time.Second)
	for !q.quiet() {
		if time.Now().After(deadline) {
			return errors.New("hedge: the goroutines did not settle within 10 s")
		}
		runtime.Gosched()
	}
	return nil
}

// quiet reports whether every goroutine but the caller's (runtime.Stack
// lists it first) is blocked.
func (q *quiescence) quiet() bool {
	n := runtime.Stack(q.buf, true)
	for n == len(q.buf) {
		q.buf = make([]byte, 2*len(q.buf))
		n = runtime.Stack(q.buf, true)
	}
	blocks := bytes.Split(q.buf[:n], []byte("\n\n"))
	for _, b := range blocks[1:] {
		_, rest, ok := bytes.Cut(b, []byte(" ["))
		if !ok {
			continue
		}
		state, _, _ := bytes.Cut(rest, []byte("]"))
		state, _, _ = bytes.Cut(state, []byte(","))
		switch {
		case blocked[string(state)]:
		case string(state) == "syscall" &&
			(bytes.Contains(b, []byte("os/signal.signal_recv")) || bytes.Contains(b, []byte("runtime/pprof.readProfile"))):
		default:
			return false
		}
	}
	return true
}

// runHedge simulates the hedge scenario and prints its tables.
func runHedge(p HedgeParams, w io.Writer) error {
	tail, outage, err := SimulateHedge(p)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "long tail: %g calls/s for %v; each attempt answers after %v ± %v, %g%% of them after %g× that\n",
		p.Rate, p.Duration, p.Median, p.Jitter, 100*p.TailShare, p.TailFactor)
	fmt.Fprintf(w, "hedges: MaxHedges 1, BudgetRatio 0.05 (default); p%g clamped to [%v, %v], or a fixed %v\n\n",
		p.Percentile, p.MinDelay, p.MaxDelay, p.Delay)
	table(w, tail, []tableRow{
		{"calls", func(r HedgeResult) any { return r.Calls }},
		{"attempts", func(r HedgeResult) any { return r.Attempts }},
		{"hedges started", func(r HedgeResult) any { return r.Hedges }},
		{"extra load", func(r HedgeResult) any { return pct(r.ExtraLoad()) }},
		{"HEDGED", func(r HedgeResult) any { return r.Hedged }},
		{"successes", func(r HedgeResult) any { return r.Success }},
		{"p50 latency", func(r HedgeResult) any { return r.P50.Round(time.Microsecond) }},
		{"p90 latency", func(r HedgeResult) any { return r.P90.Round(time.Microsecond) }},
		{"p99 latency", func(r HedgeResult) any { return r.P99.Round(time.Microsecond) }},
		{"max latency", func(r HedgeResult) any { return r.Max.Round(time.Microsecond) }},
	})
	if len(outage) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\noutage: %g calls/s for %v, the same tail; from %v to %v every attempt fails, after %v (slow) or its usual time (errors)\n\n",
		p.Rate, p.OutageRun, p.OutageStart, p.OutageEnd, p.SlowFailure)
	for i := range outage {
		outage[i].Mode += " (" + outage[i].Outage + ")"
	}
	table(w, outage, []tableRow{
		{"calls in the outage", func(r HedgeResult) any { return r.OutageCalls }},
		{"their attempts", func(r HedgeResult) any { return r.OutageAttempts }},
		{"hedges started", func(r HedgeResult) any { return r.OutageHedges }},
		{"  before a breaker opened", func(r HedgeResult) any { return r.HedgesBeforeOpen }},
		{"  while open or half-open", func(r HedgeResult) any { return r.HedgesWhileNotClosed }},
		{"extra load in the outage", func(r HedgeResult) any { return pct(r.OutageExtraLoad()) }},
		{"  before a breaker opened", func(r HedgeResult) any { return pct(r.ExtraLoadBeforeOpen()) }},
		{"first breaker opened after", func(r HedgeResult) any { return r.OpenedAfter.Round(time.Millisecond) }},
		{"HEDGED (whole run)", func(r HedgeResult) any { return r.Hedged }},
	})
	_, err = fmt.Fprintln(w)
	return err
}

// tableRow is a row of a hedge table: its name and each run's cell.
type tableRow struct {
	name string
	cell func(HedgeResult) any
}

// table prints rows with a column per run.
func table(w io.Writer, rs []HedgeResult, rows []tableRow) {
	fmt.Fprintf(w, "%-28s", "")
	for _, r := range rs {
		fmt.Fprintf(w, " %20s", r.Mode)
	}
	fmt.Fprintln(w)
	for _, row := range rows {
		fmt.Fprintf(w, "%-28s", row.name)
		for _, r := range rs {
			fmt.Fprintf(w, " %20v", row.cell(r))
		}
		fmt.Fprintln(w)
	}
}
