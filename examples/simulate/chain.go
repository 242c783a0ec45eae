package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/metrics"
)

// ChainParams describes the chain scenario: requests enter the first service
// of a chain (A calls B calls C ...), and the last one turns partly faulty
// for a while.
//
// The model, a discrete-event simulation on a virtual clock:
//   - Requests enter A evenly spaced, Rate per second. The client gives up
//     ClientTimeout after sending.
//   - Each service has Workers workers (thread per request) and an unbounded
//     FIFO of waiting requests. A waiting request whose caller has already
//     given up is dropped when it reaches the front, without taking a
//     worker (the server checks the propagated deadline before it starts):
//     the queue is bounded by the callers' timeouts. A request a worker has
//     started runs to the end even if its caller has left.
//   - A worker of a service other than the last spends Work, then calls the
//     next service and holds on until the answer or Timeout, then answers
//     its caller at once with what it got: ok, degraded or error (a timeout
//     is an error). There are no retries.
//   - The last service answers ok after Latency; from FaultStart to
//     FaultEnd (by the time its worker starts), a share Errors of its
//     answers are errors after Latency and a share Slow are ok answers after
//     SlowLatency, drawn from a PCG generator seeded with Seed.
//   - With breakers, each service's call to the next goes through a
//     circuit.Breaker on the virtual clock, set to each event's instant: an
//     error or timeout counts as a failure, an ok or degraded answer as a
//     success, and a refused call is answered at once with a degraded
//     answer (a fallback): not a success of the chain.
type ChainParams struct {
	Services             int           // services in the chain, at least 2
	Rate                 float64       // requests per second entering the first service
	Duration             time.Duration // length of the run
	Workers              int           // workers per service
	Work                 time.Duration // a worker's own work before it calls the next service
	Latency              time.Duration // the last service's answer time when healthy
	Errors, Slow         float64       // shares of the last service's answers during the fault
	SlowLatency          time.Duration // the answer time of a slow answer
	FaultStart, FaultEnd time.Duration // the fault, by when the last service starts a request
	Timeout              time.Duration // a service's timeout on its call to the next
	ClientTimeout        time.Duration // the client's timeout on its call to the first service
	Seed                 uint64        // seeds the fault draws
	BreakerParams                      // the breakers' configuration
	Breakers             bool          // false: no breakers
}

// DefaultChainParams returns the defaults of the chain scenario's flags.
func DefaultChainParams() ChainParams {
	return ChainParams{
		Services: 3, Rate: 1200, Duration: 60 * time.Second, Workers: 200,
		Work: 2 * time.Millisecond, Latency: 10 * time.Millisecond,
		Errors: 0.4, Slow: 0.2, SlowLatency: time.Second,
		FaultStart: 20 * time.Second, FaultEnd: 40 * time.Second,
		Timeout: 250 * time.Millisecond, ClientTimeout: time.Second, Seed: 1,
		BreakerParams: DefaultBreakerParams(), Breakers: true,
	}
}

// recoveredShare is the share of its pre-fault ok rate that the first
// service must be back to, in a whole second, to count as recovered.
const recoveredShare = 0.95

// Hop is what one service of the chain saw in one run.
type Hop struct {
	Name string
	// Arrived counts the calls that reached the service during the fault;
	// Amplification is Arrived over the requests that entered the first
	// service during the fault.
	Arrived       int
	Amplification float64
	PeakBusy      int // most workers busy at once
	PeakQueue     int // most requests waiting at once (those given up on included)
	// Transitions of the breaker on this service's call to the next (with
	// breakers; empty for the last service), and the time it spent open
	// or half-open.
	Transitions []Transition
	NotClosed   time.Duration
}

// ChainRun is what one run of the chain measured, at the first service.
type ChainRun struct {
	Breakers bool
	Requests int // requests sent to the first service
	// The first service's answers per slot (100 ms) of the run, by the
	// time the client got them. An answer after the client's timeout, or a
	// request dropped from the first service's queue, is Failed.
	OK, Degraded, Failed []int
	// Mean ok answers per second before the fault (from 1 s: the first
	// second fills the pipeline), during it, and after it.
	OKBefore, OKDuring, OKAfter float64
	DegradedDuring              float64 // mean degraded answers per second during the fault
	// Recovery after the fault, on buckets of 1 s and of one slot.
	Recovery, RecoverySlot Recovery
	Hops                   []Hop
}

// Recovery is the time from the end of the fault to the start of the first
// bucket whose ok answers reach recoveredShare of the pre-fault level
// (OKBefore over the bucket); Recovered is false if no bucket of the run
// did. Its resolution is the bucket.
type Recovery struct {
	Bucket    time.Duration
	After     time.Duration
	Recovered bool
}

// slot is the resolution of the per-slot counts of a ChainRun.
const slot = 100 * time.Millisecond

// ChainResult holds the chain scenario's two runs.
type ChainResult struct {
	Without, With ChainRun
}

// SimulateChain runs p without and with breakers.
func SimulateChain(p ChainParams) (ChainResult, error) {
	if err := p.validate(); err != nil {
		return ChainResult{}, err
	}
	var res ChainResult
	var err error
	p.Breakers = false
	if res.Without, err = simulateChain(p); err != nil {
		return ChainResult{}, err
	}
	p.Breakers = true
	if res.With, err = simulateChain(p); err != nil {
		return ChainResult{}, err
	}
	return res, nil
}

func (p ChainParams) validate() error {
	share := func(v float64) bool { return v >= 0 && v <= 1 }
	switch {
	case p.Services < 2 || p.Services > 26:
		return usage("-services %d must be from 2 to 26", p.Services)
	case !(p.Rate > 0) || math.IsInf(p.Rate, 0):
		return usage("-rate %v must be a positive number", p.Rate)
	case p.Duration < time.Second || p.Duration%time.Second != 0:
		return usage("-duration %v must be a whole number of seconds, at least 1s", p.Duration)
	case p.Rate*p.Duration.Seconds() > maxRequests:
		return usage("-rate %v for -duration %v is more than %d requests", p.Rate, p.Duration, maxRequests)
	case p.Workers < 1:
		return usage("-workers %d must be at least 1", p.Workers)
	case p.Work < 0:
		return usage("-work %v must not be negative", p.Work)
	case p.Latency < 0:
		return usage("-latency %v must not be negative", p.Latency)
	case p.SlowLatency < 0:
		return usage("-slowlatency %v must not be negative", p.SlowLatency)
	case !share(p.Errors) || !share(p.Slow) || p.Errors+p.Slow > 1:
		return usage("-errors %v and -slow %v must be shares from 0 to 1 that add up to at most 1", p.Errors, p.Slow)
	case p.FaultStart < 2*time.Second || p.FaultEnd <= p.FaultStart || p.FaultEnd >= p.Duration ||
		p.FaultStart%time.Second != 0 || p.FaultEnd%time.Second != 0:
		return usage("-fault %v-%v must be START-END in whole seconds, with 2s <= START < END < -duration %v",
			p.FaultStart, p.FaultEnd, p.Duration)
	case p.Timeout <= 0:
		return usage("-timeout %v must be positive", p.Timeout)
	case p.ClientTimeout <= 0:
		return usage("-client-timeout %v must be positive", p.ClientTimeout)
	}
	if err := p.config("", nil, nil).Validate(); err != nil {
		return usage("%w", err)
	}
	return nil
}

// answer is what a service answers its caller.
type answer uint8

const (
	answerOK answer = iota
	answerDegraded
	answerError
)

// call is one request to one service.
type call struct {
	svc      int
	parent   *call         // the caller's own request; nil for a client's
	sent     time.Duration // when the caller sent it
	deadline time.Duration // when the caller gives up
	permit   circuit.Permit
	result   answer // the last service's answer, drawn when it starts
	done     bool   // answered, or given up on by its caller
}

// eventKind says what happens to an event's call.
type eventKind uint8

const (
	evEnter    eventKind = iota // a client sends the call to the first service
	evWorkDone                  // the call's worker finished its own work
	evTimeout                   // the call's caller gives up on it
)

type event struct {
	at   time.Duration
	seq  uint64 // breaks ties in the order of scheduling: determinism
	kind eventKind
	c    *call
}

// eventQueue is a binary min-heap of events by (at, seq).
type eventQueue struct {
	ev  []event
	seq uint64
}

func (q *eventQueue) less(i, j int) bool {
	a, b := &q.ev[i], &q.ev[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}

func (q *eventQueue) push(at time.Duration, kind eventKind, c *call) {
	q.seq++
	q.ev = append(q.ev, event{at: at, seq: q.seq, kind: kind, c: c})
	for i := len(q.ev) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			break
		}
		q.ev[i], q.ev[parent] = q.ev[parent], q.ev[i]
		i = parent
	}
}

func (q *eventQueue) pop() event {
	top := q.ev[0]
	last := len(q.ev) - 1
	q.ev[0] = q.ev[last]
	q.ev = q.ev[:last]
	for i := 0; ; {
		small, l, r := i, 2*i+1, 2*i+2
		if l < last && q.less(l, small) {
			small = l
		}
		if r < last && q.less(r, small) {
			small = r
		}
		if small == i {
			break
		}
		q.ev[i], q.ev[small] = q.ev[small], q.ev[i]
		i = small
	}
	return top
}

// service is one service's state during a run.
type service struct {
	busy  int
	queue []*call
	b     *circuit.Breaker // on its call to the next service; nil without breakers
	hop   *Hop
	since time.Duration // when the breaker last left the closed state
}

// chainSim is one run in progress.
type chainSim struct {
	p        ChainParams
	q        eventQueue
	svcs     []service
	rng      *rand.Rand
	run      ChainRun
	entering int // requests entering the first service during the fault
}

// inFault reports whether t is within the fault.
func (s *chainSim) inFault(t time.Duration) bool { return t >= s.p.FaultStart && t < s.p.FaultEnd }

func simulateChain(p ChainParams) (ChainRun, error) {
	clock := new(metrics.ManualClock)
	slots := int(p.Duration / slot)
	s := &chainSim{
		p:    p,
		svcs: make([]service, p.Services),
		rng:  rand.New(rand.NewPCG(p.Seed, 0)),
		run: ChainRun{
			Breakers: p.Breakers, Hops: make([]Hop, p.Services),
			OK: make([]int, slots), Degraded: make([]int, slots), Failed: make([]int, slots),
		},
	}
	for i := range s.svcs {
		sv := &s.svcs[i]
		sv.hop = &s.run.Hops[i]
		sv.hop.Name = string(rune('A' + i))
		sv.hop.Transitions = []Transition{}
		if !p.Breakers || i == p.Services-1 {
			continue
		}
		name := fmt.Sprintf("%c->%c", 'A'+i, 'A'+i+1)
		b, err := circuit.New(p.config(name, clock, func(t circuit.Transition) {
			sv.hop.Transitions = append(sv.hop.Transitions, transitionOf(t))
			switch {
			case t.From == circuit.Closed:
				sv.since = t.At
			case t.To == circuit.Closed:
				sv.hop.NotClosed += t.At - sv.since
			}
		}))
		if err != nil {
			return ChainRun{}, fmt.Errorf("%w: %w", errUsage, err)
		}
		sv.b = b
	}

	s.q.push(0, evEnter, nil)
	for len(s.q.ev) > 0 {
		e := s.q.pop()
		if e.at >= p.Duration {
			break
		}
		clock.Set(e.at)
		switch e.kind {
		case evEnter:
			s.enter(e.at)
		case evWorkDone:
			s.workDone(e.c, e.at)
		case evTimeout:
			s.timeout(e.c, e.at)
		}
	}
	for i := range s.svcs {
		sv := &s.svcs[i]
		if sv.b != nil && sv.b.State() != circuit.Closed {
			sv.hop.NotClosed += p.Duration - sv.since
		}
		sv.hop.Amplification = float64(sv.hop.Arrived) / float64(max(s.entering, 1))
	}
	s.summarize()
	return s.run, nil
}

// enter sends request number Requests to the first service and schedules
// the next one.
func (s *chainSim) enter(t time.Duration) {
	s.run.Requests++
	if s.inFault(t) {
		s.entering++
	}
	s.arrive(&call{sent: t, deadline: t + s.p.ClientTimeout}, t)
	next := time.Duration(float64(s.run.Requests) * float64(time.Second) / s.p.Rate)
	s.q.push(next, evEnter, nil)
}

// arrive hands c to its service: to a free worker, or to the queue.
func (s *chainSim) arrive(c *call, t time.Duration) {
	sv := &s.svcs[c.svc]
	if s.inFault(t) {
		sv.hop.Arrived++
	}
	if sv.busy < s.p.Workers {
		s.start(c, t)
		return
	}
	sv.queue = append(sv.queue, c)
	sv.hop.PeakQueue = max(sv.hop.PeakQueue, len(sv.queue))
}

// start gives c a worker.
func (s *chainSim) start(c *call, t time.Duration) {
	sv := &s.svcs[c.svc]
	sv.busy++
	sv.hop.PeakBusy = max(sv.hop.PeakBusy, sv.busy)
	work := s.p.Work
	if c.svc == s.p.Services-1 {
		work = s.p.Latency
		if s.inFault(t) {
			switch u := s.rng.Float64(); {
			case u < s.p.Errors:
				c.result = answerError
			case u < s.p.Errors+s.p.Slow:
				work = s.p.SlowLatency
			}
		}
	}
	s.q.push(t+work, evWorkDone, c)
}

// workDone ends c's own work: the last service answers, the others call
// the next one.
func (s *chainSim) workDone(c *call, t time.Duration) {
	if c.svc == s.p.Services-1 {
		s.finish(c, c.result, t)
		return
	}
	var permit circuit.Permit
	if b := s.svcs[c.svc].b; b != nil {
		var err error
		if permit, err = b.Allow(); err != nil {
			s.finish(c, answerDegraded, t)
			return
		}
	}
	next := &call{svc: c.svc + 1, parent: c, sent: t, deadline: t + s.p.Timeout, permit: permit}
	s.q.push(next.deadline, evTimeout, next)
	s.arrive(next, t)
}

// timeout gives up on c, unless it was answered: its caller answers error.
func (s *chainSim) timeout(c *call, t time.Duration) {
	if c.done {
		return
	}
	c.done = true
	c.permit.Record(metrics.Timeout, t-c.sent)
	s.finish(c.parent, answerError, t)
}

// finish answers c with a, frees its worker for the next live request in
// the queue, and passes the answer on to the caller.
func (s *chainSim) finish(c *call, a answer, t time.Duration) {
	sv := &s.svcs[c.svc]
	sv.busy--
	for len(sv.queue) > 0 {
		n := sv.queue[0]
		sv.queue[0] = nil
		sv.queue = sv.queue[1:]
		if t < n.deadline {
			s.start(n, t)
			break
		}
		if n.parent == nil {
			s.count(answerError, t)
		}
	}
	switch {
	case c.parent == nil:
		if t >= c.deadline {
			a = answerError
		}
		s.count(a, t)
	case !c.done:
		c.done = true
		outcome := metrics.Success
		if a == answerError {
			outcome = metrics.Failure
		}
		c.permit.Record(outcome, t-c.sent)
		s.finish(c.parent, a, t)
	}
}

// count records an answer of the first service to its client at t.
func (s *chainSim) count(a answer, t time.Duration) {
	i := int(t / slot)
	switch a {
	case answerOK:
		s.run.OK[i]++
	case answerDegraded:
		s.run.Degraded[i]++
	default:
		s.run.Failed[i]++
	}
}

// summarize computes the run's means and recovery from its per-slot counts.
func (s *chainSim) summarize() {
	r, p := &s.run, s.p
	mean := func(v []int, from, to time.Duration) float64 {
		sum := 0
		for _, n := range v[from/slot : to/slot] {
			sum += n
		}
		return float64(sum) / (to - from).Seconds()
	}
	r.OKBefore = mean(r.OK, time.Second, p.FaultStart)
	r.OKDuring = mean(r.OK, p.FaultStart, p.FaultEnd)
	r.DegradedDuring = mean(r.Degraded, p.FaultStart, p.FaultEnd)
	r.OKAfter = mean(r.OK, p.FaultEnd, p.Duration)
	r.Recovery = recovery(r.OK, time.Second, r.OKBefore, p.FaultEnd)
	r.RecoverySlot = recovery(r.OK, slot, r.OKBefore, p.FaultEnd)
}

// recovery finds the first bucket of length bucket, from end on, in which
// the ok answers counted per slot in ok reach recoveredShare of okPerSecond.
// end and bucket are multiples of slot.
func recovery(ok []int, bucket time.Duration, okPerSecond float64, end time.Duration) Recovery {
	per := int(bucket / slot)
	want := recoveredShare * okPerSecond * bucket.Seconds()
	for i := int(end / slot); i+per <= len(ok); i += per {
		n := 0
		for _, v := range ok[i : i+per] {
			n += v
		}
		if float64(n) >= want {
			return Recovery{Bucket: bucket, After: time.Duration(i)*slot - end, Recovered: true}
		}
	}
	return Recovery{Bucket: bucket}
}

// printChainTable prints the chain scenario's parameters and its two runs.
func printChainTable(w io.Writer, p ChainParams, r ChainResult) error {
	names := make([]string, p.Services)
	for i := range names {
		names[i] = r.With.Hops[i].Name
	}
	last := names[len(names)-1]
	fmt.Fprintf(w, "chain %s: %g req/s into %s, evenly spaced, for %v; %d workers per service, FIFO queues\n",
		strings.Join(names, " -> "), p.Rate, names[0], p.Duration, p.Workers)
	fmt.Fprintf(w, "bounded by the callers' timeouts; each service works %v, then calls the next (timeout %v);\n",
		p.Work, p.Timeout)
	fmt.Fprintf(w, "%s answers in %v; the client gives up after %v\n", last, p.Latency, p.ClientTimeout)
	fmt.Fprintf(w, "fault %v-%v: %s answers %g%% errors (in %v) and %g%% slow (in %v); seed %d\n",
		p.FaultStart, p.FaultEnd, last, 100*p.Errors, p.Latency, 100*p.Slow, p.SlowLatency, p.Seed)
	fmt.Fprintf(w, "breakers (with): one per call, window %v in %d buckets, min %d requests, failure ratio %g,\n",
		p.Window, p.Buckets, p.MinRequests, p.FailureRatio)
	fmt.Fprintf(w, "open %v, %d probe(s), %d successes to close; a refused call is answered degraded at once\n\n",
		p.Open, p.Probes, p.ProbeSuccesses)

	row := func(name string, a, b any) { fmt.Fprintf(w, "%-42s %12v %14v\n", name, a, b) }
	f1 := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	row("", "without", "with breakers")
	row(names[0]+" ok answers/s, before the fault", f1(r.Without.OKBefore), f1(r.With.OKBefore))
	row(names[0]+" ok answers/s, during the fault", f1(r.Without.OKDuring), f1(r.With.OKDuring))
	row(names[0]+" ok answers/s, after the fault", f1(r.Without.OKAfter), f1(r.With.OKAfter))
	row(names[0]+" degraded answers/s, during the fault", f1(r.Without.DegradedDuring), f1(r.With.DegradedDuring))
	recovered := func(r Recovery) string {
		if !r.Recovered {
			return "not in the run"
		}
		return r.After.String()
	}
	row("recovery after the fault, 1 s buckets", recovered(r.Without.Recovery), recovered(r.With.Recovery))
	row("recovery after the fault, 100 ms buckets", recovered(r.Without.RecoverySlot), recovered(r.With.RecoverySlot))
	for i, name := range names {
		if i > 0 {
			row("amplification at "+name+", during the fault",
				strconv.FormatFloat(r.Without.Hops[i].Amplification, 'f', 2, 64),
				strconv.FormatFloat(r.With.Hops[i].Amplification, 'f', 2, 64))
		}
	}
	for i, name := range names {
		occupancy := func(h Hop) string { return fmt.Sprintf("%d / %d", h.PeakBusy, h.PeakQueue) }
		row("peak busy workers / queue at "+name, occupancy(r.Without.Hops[i]), occupancy(r.With.Hops[i]))
	}
	for i, name := range names[:len(names)-1] {
		h := r.With.Hops[i]
		row(fmt.Sprintf("breaker %s->%s not closed (transitions)", name, names[i+1]), "-",
			fmt.Sprintf("%v (%d)", h.NotClosed.Round(time.Millisecond), len(h.Transitions)))
	}
	_, err := fmt.Fprintln(w)
	return err
}
