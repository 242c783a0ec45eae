package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/circuit/healthcheck"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/metrics"
)

// ChainParams describes the chain scenario: a replay of a fault-injection
// drill on a chain of three services, gateway → order → inventory, with
// bulwark's command groups on the calls. See docs/chain-replay.md.
//
// The model, a discrete-event simulation on a virtual clock whose threads
// are goroutines run one at a time (see scheduler):
//   - Requests enter the gateway evenly spaced, Rate per second. The client
//     gives up ClientTimeout after sending (an error) and never retries.
//     A share StockShare of them, evenly spread, are for order's stock
//     endpoint, which calls inventory; the others for its history endpoint,
//     which does not.
//   - Each service has Workers threads, shared by all its endpoints, and a
//     FIFO of Queue requests beyond them; a request that finds both full is
//     refused at once with an error (Tomcat's maxThreads, and its NIO
//     connector's maxConnections plus acceptCount less the threads).
//     A thread serves its request to the end, even if the caller has left.
//   - The gateway's and order's threads work Work, then (except order's
//     history endpoint, which answers then) call the next service through a
//     bulwark group (command.Execute, Semaphore strategy, a permit per
//     caller thread so the bulkhead never binds) and wait for the answer or
//     their timeout: GatewayTimeout on order, OrderTimeout on inventory,
//     each a client-side timeout modelled in Run (an error, so bulwark
//     counts it as a FAILURE). A failed or timed-out call is retried by the
//     group, Retries times at most, after bulwark's jittered backoff
//     (RetryBackoff, doubling, capped at 1 s), without a budget unless
//     RetryBudget is set. The caller then answers what it got: ok, degraded
//     or an error. Inventory answers ok after Latency.
//   - From FaultStart to FaultEnd the fault is injected in front of
//     inventory, as a proxy does it: a share Errors of the calls sent to it
//     are refused at once with an error, a share Slow are delayed by Delay
//     before they reach it; drawn from a PCG generator seeded with Seed.
//   - Without breakers, the groups' breakers are forced closed and there
//     is no fallback: a failed call is an error. With them, both breakers
//     of each call (the group's and the command's) are configured by
//     BreakerParams, and, with Fallback, a call that fails or is refused is
//     answered at once with a degraded answer (not an ok one).
//   - With a health check (Policies.HealthCheck), every breaker that is open
//     is checked at that interval from its opening, on the virtual clock,
//     taking no time: a check passes if the service checked has a thread
//     free and, for inventory, the fault lets it through (drawn as a call;
//     a delay fails it if it reaches checkTimeout,
//     the check's timeout).
type ChainParams struct {
	Rate                 float64       // requests per second entering the gateway, evenly spaced
	Duration             time.Duration // length of the run, whole seconds
	StockShare           float64       // share of the requests for order's stock endpoint (calls inventory)
	Workers              int           // threads per service, shared by its endpoints
	Queue                int           // requests waiting per service beyond its threads
	Work                 time.Duration // the gateway's and order's own work on a request
	Latency              time.Duration // inventory's answer time
	Errors, Slow         float64       // shares of the calls to inventory the fault refuses, and delays
	Delay                time.Duration // the fault's delay
	FaultStart, FaultEnd time.Duration // the fault, by when a call is sent to inventory
	ClientTimeout        time.Duration // the client's timeout on the gateway
	GatewayTimeout       time.Duration // the gateway's timeout on order
	OrderTimeout         time.Duration // order's timeout on inventory
	Retries              int           // retries per call by the gateway and order
	RetryBackoff         time.Duration // base of bulwark's retry backoff
	RetryBudget          float64       // the groups' retry budget ratio; 0: no budget
	Seed                 uint64        // seeds the fault, jitter and health-check draws
	BreakerParams                      // the breakers' configuration (with breakers)
	Fallback             bool          // with breakers: a failed or refused call is answered degraded
	Breakers             bool          // false: breakers forced closed, no fallback
}

// DefaultChainParams returns the defaults of the chain scenario's flags.
// Where the source gives a figure (1,200 req/s, 200 threads at order,
// 40 % errors and 20 % slow calls for 20 s, its breaker configuration) it
// is used; the rest are common defaults, chosen before the first run (see
// docs/chain-replay.md).
func DefaultChainParams() ChainParams {
	return ChainParams{
		Rate: 1200, Duration: 60 * time.Second, StockShare: 0.5, Workers: 200, Queue: 9900,
		Work: 2 * time.Millisecond, Latency: 10 * time.Millisecond,
		Errors: 0.4, Slow: 0.2, Delay: 2 * time.Second,
		FaultStart: 20 * time.Second, FaultEnd: 40 * time.Second,
		ClientTimeout: 5 * time.Second, GatewayTimeout: 3 * time.Second, OrderTimeout: time.Second,
		Retries: 2, RetryBackoff: 50 * time.Millisecond, Seed: 1,
		BreakerParams: chainBreakerDefaults(), Fallback: true, Breakers: true,
	}
}

// chainBreakerDefaults is the source's breaker configuration: a 5 s window,
// 20 calls at least, 50 % failures, open 30 s doubling to 60 s, 3 probe
// successes to close.
func chainBreakerDefaults() BreakerParams {
	bp := DefaultBreakerParams()
	bp.Window, bp.Open, bp.Backoff, bp.MaxOpen = 5*time.Second, 30*time.Second, 2, 60*time.Second
	return bp
}

// The hops of the chain, in order.
const (
	hopGateway = iota
	hopOrder
	hopInventory
	hops
)

var hopNames = [hops]string{"gateway", "order", "inventory"}

// recoveredShare is the share of its pre-fault ok rate that the gateway
// must be back to, in a bucket, to count as recovered.
const recoveredShare = 0.95

// Hop is what one service of the chain saw in one run; the counts are of
// the fault's duration.
type Hop struct {
	Name string
	// Calls counts the calls sent to the service (the client's requests,
	// the callers' attempts, retries included); Amplification is Calls
	// over the requests that entered the gateway.
	Calls         int
	Amplification float64
	// PerCall is Calls over the calls its caller made (Execute), so the
	// retries' share: 1 means none. Zero for the gateway.
	PerCall   float64
	Refused   int     // calls refused at once: every thread busy, the queue full
	MeanBusy  float64 // threads busy, on average
	Full      float64 // share of the time every thread was busy
	PeakBusy  int     // most threads busy at once, over the whole run
	PeakQueue int     // most requests waiting at once, over the whole run
}

// BreakerRun is one breaker's transitions in a run, and the time it spent
// open or half-open.
type BreakerRun struct {
	Name        string // "caller: group" or "caller: group/command"
	Transitions []BreakerTransition
	NotClosed   time.Duration
}

// BreakerTransition is a transition with the open duration in force after
// it (so a backoff shows).
type BreakerTransition struct {
	Transition
	OpenFor time.Duration
}

// ChainRun is what one run of the chain measured.
type ChainRun struct {
	WithBreakers bool
	Requests     int // requests sent to the gateway
	// The gateway's answers per slot (100 ms) of the run, by the time the
	// client got them; a client's timeout is Failed, at its instant.
	OK, Degraded, Failed []int
	// Mean ok answers per second before the fault (from 1 s: the first
	// second fills the pipeline), during it, and after it.
	OKBefore, OKDuring, OKAfter float64
	DegradedDuring              float64 // mean degraded answers per second during the fault
	// HistoryOKDuring is the part of OKDuring for the history endpoint,
	// which never calls inventory.
	HistoryOKDuring float64
	// The lowest ok, and ok or degraded, answers in a whole second of the
	// fault.
	OKLowest, AnsweredLowest int
	// Recovery after the fault, on buckets of 1 s and of one slot.
	Recovery, RecoverySlot Recovery
	Hops                   []Hop
	// FaultErrors and FaultDelayed count the calls the fault refused and
	// delayed.
	FaultErrors, FaultDelayed int
	Breakers                  []BreakerRun // with breakers: each breaker, in a fixed order
	HealthChecks              int          // health checks run
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
	case !(p.Rate > 0) || math.IsInf(p.Rate, 0):
		return usage("-rate %v must be a positive number", p.Rate)
	case p.Duration < time.Second || p.Duration%time.Second != 0:
		return usage("-duration %v must be a whole number of seconds, at least 1s", p.Duration)
	case p.Rate*p.Duration.Seconds() > maxChainRequests:
		return usage("-rate %v for -duration %v is more than %d requests", p.Rate, p.Duration, maxChainRequests)
	case !share(p.StockShare):
		return usage("-stock-share %v must be a share from 0 to 1", p.StockShare)
	case p.Workers < 1 || p.Workers > maxWorkers:
		return usage("-workers %d must be from 1 to %d", p.Workers, maxWorkers)
	case p.Queue < 0:
		return usage("-queue %d must not be negative", p.Queue)
	case p.Work < 0:
		return usage("-work %v must not be negative", p.Work)
	case p.Latency < 0:
		return usage("-latency %v must not be negative", p.Latency)
	case p.Delay < 0:
		return usage("-delay %v must not be negative", p.Delay)
	case !share(p.Errors) || !share(p.Slow) || p.Errors+p.Slow > 1:
		return usage("-errors %v and -slow %v must be shares from 0 to 1 that add up to at most 1", p.Errors, p.Slow)
	case p.FaultStart < 2*time.Second || p.FaultEnd <= p.FaultStart || p.FaultEnd >= p.Duration ||
		p.FaultStart%time.Second != 0 || p.FaultEnd%time.Second != 0:
		return usage("-fault %v-%v must be START-END in whole seconds, with 2s <= START < END < -duration %v",
			p.FaultStart, p.FaultEnd, p.Duration)
	case p.ClientTimeout <= 0:
		return usage("-client-timeout %v must be positive", p.ClientTimeout)
	case p.GatewayTimeout <= 0:
		return usage("-gateway-timeout %v must be positive", p.GatewayTimeout)
	case p.OrderTimeout <= 0:
		return usage("-order-timeout %v must be positive", p.OrderTimeout)
	case p.Retries < 0 || p.Retries > 9:
		return usage("-retries %d must be from 0 to 9 (a call makes at most 10 attempts)", p.Retries)
	case p.RetryBackoff < 0 || p.RetryBackoff > time.Second:
		return usage("-retry-backoff %v must be from 0 to 1s", p.RetryBackoff)
	case p.RetryBudget < 0 || p.RetryBudget > 1:
		return usage("-retry-budget %v must be from 0 (no budget) to 1", p.RetryBudget)
	}
	if err := p.config("", nil, nil).Validate(); err != nil {
		return usage("%w", err)
	}
	return p.Policies.validate()
}

// maxChainRequests bounds a chain run: each request is several events and
// goroutine hand-offs.
const maxChainRequests = 2_000_000

// maxWorkers bounds -workers: each busy thread is a goroutine.
const maxWorkers = 100_000

// answer is what a service answers its caller.
type answer uint8

const (
	answerOK answer = iota
	answerDegraded
	answerError
)

// endpoint is the order endpoint a request is for.
type endpoint uint8

const (
	epStock   endpoint = iota // calls inventory
	epHistory                 // does not
)

func (e endpoint) String() string {
	if e == epStock {
		return "stock"
	}
	return "history"
}

// Errors a call's Run returns; bulwark counts each as a FAILURE.
var (
	errAnswer  = errors.New("the service answered an error")
	errTimeout = errors.New("no answer before the caller's timeout")
	errStopped = errors.New("the run is over")
)

// request is one call to one service.
type request struct {
	ep       endpoint
	caller   *thread // waiting for the answer; nil for a client's request
	deadline time.Duration
	answered bool // answered, or given up on by its caller
	timedOut bool
	answer   answer
}

// service is one service's state during a run.
type service struct {
	hop   *Hop
	made  int // calls made to it during the fault (Execute), retries not counted
	busy  int
	queue []*request
	// The time integrals over the fault of the busy threads and of the
	// time with all of them busy, up to last.
	busyArea, fullArea time.Duration
	last               time.Duration
}

// breakerTrack follows one breaker of a run.
type breakerTrack struct {
	run     BreakerRun
	checker *healthcheck.Checker // with a health check (Policies.HealthCheck); else nil
	since   time.Duration        // when it last left the closed state
	gen     int                  // its transitions: a scheduled health check of another generation is void
}

// chainSim is one run in progress.
type chainSim struct {
	p         ChainParams
	s         *scheduler
	svcs      [hops]service
	fault     *rand.Rand // the fault's draws
	health    *rand.Rand // the health checks' draws
	run       ChainRun
	entering  int // requests entering the gateway during the fault
	historyOK int // ok answers to the client for history during the fault
	toOrder   *command.Group
	toInv     *command.Group
	regs      []*command.Registry
	idle      []*vehicle               // parked, last parked first
	tracks    []*breakerTrack          // in the order of ChainRun.Breakers
	byName    map[string]*breakerTrack // by the breaker's own name
}

// threadKey is the context key of the thread a call runs on.
type threadKey struct{}

// callCmd is a service's call to the next one, as a bulwark command: Run
// sends the request and waits, on the caller's thread, for the answer or
// the timeout.
type callCmd struct {
	sim     *chainSim
	to      int // the hop called
	ep      endpoint
	timeout time.Duration
}

// Name names the command by the order endpoint it serves.
func (c callCmd) Name() string { return c.ep.String() }

// Idempotent lets the group retry the call.
func (c callCmd) Idempotent() bool { return true }

// Run makes one attempt of the call.
func (c callCmd) Run(ctx context.Context) (answer, error) {
	return c.sim.call(ctx.Value(threadKey{}).(*thread), c.to, c.ep, c.timeout)
}

// Fallback answers degraded at once.
func (c callCmd) Fallback(context.Context, error) (answer, error) { return answerDegraded, nil }

func simulateChain(p ChainParams) (ChainRun, error) {
	slots := int(p.Duration / slot)
	s := &chainSim{
		p:      p,
		fault:  rand.New(rand.NewPCG(p.Seed, 0)),
		health: rand.New(rand.NewPCG(p.Seed, 3)),
		run: ChainRun{
			WithBreakers: p.Breakers, Hops: make([]Hop, hops), Breakers: []BreakerRun{},
			OK: make([]int, slots), Degraded: make([]int, slots), Failed: make([]int, slots),
		},
		byName: map[string]*breakerTrack{},
	}
	s.s = newScheduler(new(metrics.ManualClock), s.event,
		0, p.Work, p.Latency, p.Delay, p.ClientTimeout, p.GatewayTimeout, p.OrderTimeout)
	for i := range s.svcs {
		s.svcs[i].hop = &s.run.Hops[i]
		s.run.Hops[i].Name = hopNames[i]
	}
	var err error
	if s.toOrder, err = s.group(hopGateway, hopOrder, 1, epStock, epHistory); err != nil {
		return ChainRun{}, err
	}
	if s.toInv, err = s.group(hopOrder, hopInventory, 2, epStock); err != nil {
		return ChainRun{}, err
	}

	s.s.post(0, evEnter, 0, nil)
	s.s.run(p.Duration)
	for _, reg := range s.regs {
		if err := reg.Close(context.Background()); err != nil {
			return ChainRun{}, err
		}
	}
	s.summarize()
	return s.run, nil
}

// checkTimeout bounds a health check: a delay of the fault at least this
// long fails it.
const checkTimeout = time.Second

// group creates the group through which hop caller calls hop callee, with
// a command per endpoint, and tracks its breakers. stream selects the
// retry jitter's generator.
func (s *chainSim) group(caller, callee int, stream uint64, eps ...endpoint) (*command.Group, error) {
	p, clock := s.p, s.s.clock
	name := hopNames[callee]
	bc := p.config(name, clock, func(t circuit.Transition) { s.transition(t) })
	if !p.Breakers {
		bc.Mode = circuit.ForcedClosed
	}
	jitter := rand.New(rand.NewPCG(p.Seed, stream))
	rc := retry.Config{}
	if p.Retries > 0 {
		rc = retry.Config{
			MaxAttempts: 1 + p.Retries, Backoff: max(p.RetryBackoff, 1), MaxBackoff: time.Second,
			BudgetRatio: p.RetryBudget, NoBudget: p.RetryBudget == 0,
			Sleep: func(ctx context.Context, d time.Duration) error {
				if !ctx.Value(threadKey{}).(*thread).sleep(d) {
					return errStopped
				}
				return nil
			},
			Rand: jitter.Float64,
		}
	}
	cmds := map[string]command.CommandConfig{}
	for _, ep := range eps {
		cmds[ep.String()] = command.CommandConfig{}
	}
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	s.regs = append(s.regs, reg)
	g, err := reg.NewGroup(name, command.GroupConfig{
		Strategy: command.Semaphore, MaxConcurrent: p.Workers, Timeout: command.NoTimeout,
		Window: bc.Window, Breaker: bc, CommandBreaker: bc, Commands: cmds,
		NoFallback: !p.Breakers || !p.Fallback, Retry: rc,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if !p.Breakers {
		return g, nil
	}
	track := func(b *circuit.Breaker) error {
		name := b.Config().Name
		tr := &breakerTrack{run: BreakerRun{Name: hopNames[caller] + ": " + name, Transitions: []BreakerTransition{}}}
		if p.HealthCheck > 0 {
			c, err := healthcheck.Start(b, healthcheck.Config{
				Check:    func(context.Context) error { return s.check(callee) },
				Interval: healthcheck.Manual, // run on the virtual clock by scheduleCheck
				Timeout:  checkTimeout,
			})
			if err != nil {
				return err
			}
			tr.checker = c
		}
		s.tracks = append(s.tracks, tr)
		s.byName[name] = tr
		return nil
	}
	if err := track(g.Breaker()); err != nil {
		return nil, err
	}
	for _, ep := range eps {
		b, _ := g.CommandBreaker(ep.String())
		if err := track(b); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// transition follows a breaker's transition: its record, its time not
// closed, and its health checks.
func (s *chainSim) transition(t circuit.Transition) {
	if s.s.stopping {
		return // the run is over: the threads are only unwinding
	}
	tr := s.byName[t.Name]
	tr.run.Transitions = append(tr.run.Transitions, BreakerTransition{transitionOf(t), t.OpenDuration})
	switch {
	case t.From == circuit.Closed:
		tr.since = t.At
	case t.To == circuit.Closed:
		tr.run.NotClosed += t.At - tr.since
	}
	tr.gen++
	if t.To == circuit.Open && s.p.HealthCheck > 0 {
		s.scheduleCheck(tr, tr.gen, t.At+s.p.HealthCheck)
	}
}

// scheduleCheck runs a health check of tr's breaker at instant at, and
// every interval after a failed one, while its generation is gen.
func (s *chainSim) scheduleCheck(tr *breakerTrack, gen int, at time.Duration) {
	s.s.at(at, func() {
		if tr.gen != gen {
			return
		}
		s.run.HealthChecks++
		if tr.checker.Check(context.Background()) != nil && tr.gen == gen {
			s.scheduleCheck(tr, gen, at+s.p.HealthCheck)
		}
	})
}

// check is a health check of hop h now, taking no virtual time: it needs a
// free thread, and a check of inventory passes through the fault like a
// call: refused, or delayed as long as the check's timeout or longer.
func (s *chainSim) check(h int) error {
	sv := &s.svcs[h]
	if sv.busy >= s.p.Workers {
		return fmt.Errorf("%s: every thread busy", hopNames[h])
	}
	if h != hopInventory || !s.inFault(s.s.now()) {
		return nil
	}
	switch u := s.health.Float64(); {
	case u < s.p.Errors:
		return fmt.Errorf("%s: refused by the fault", hopNames[h])
	case u < s.p.Errors+s.p.Slow && s.p.Delay >= checkTimeout:
		return fmt.Errorf("%s: delayed by the fault past the check's timeout", hopNames[h])
	}
	return nil
}

// inFault reports whether t is within the fault.
func (s *chainSim) inFault(t time.Duration) bool { return t >= s.p.FaultStart && t < s.p.FaultEnd }

// endpointOf returns the endpoint of request number i: StockShare of the
// requests, evenly spread, are for stock.
func (s *chainSim) endpointOf(i int) endpoint {
	if math.Floor(float64(i+1)*s.p.StockShare) > math.Floor(float64(i)*s.p.StockShare) {
		return epStock
	}
	return epHistory
}

// enter sends the client's next request to the gateway and schedules the
// one after.
func (s *chainSim) enter() {
	t := s.s.now()
	r := &request{ep: s.endpointOf(s.run.Requests), deadline: t + s.p.ClientTimeout}
	s.run.Requests++
	if s.inFault(t) {
		s.entering++
	}
	s.s.post(r.deadline, evGiveUp, 0, r)
	s.send(hopGateway, r)
	s.s.post(time.Duration(float64(s.run.Requests)*float64(time.Second)/s.p.Rate), evEnter, 0, nil)
}

// send delivers r to hop h now, through the fault for inventory. It runs
// on the scheduler's goroutine.
func (s *chainSim) send(h int, r *request) {
	t := s.s.now()
	if s.inFault(t) {
		s.svcs[h].hop.Calls++
	}
	if h == hopInventory && s.inFault(t) {
		switch u := s.fault.Float64(); {
		case u < s.p.Errors:
			s.run.FaultErrors++
			s.respond(r, answerError)
			return
		case u < s.p.Errors+s.p.Slow:
			s.run.FaultDelayed++
			s.s.post(t+s.p.Delay, evArrive, h, r)
			return
		}
	}
	s.arrive(h, r)
}

// arrive hands r to a free thread of hop h, or to its queue, or refuses it.
func (s *chainSim) arrive(h int, r *request) {
	sv := &s.svcs[h]
	switch {
	case sv.busy < s.p.Workers:
		s.setBusy(sv, sv.busy+1)
		s.begin(h, r)
	case len(sv.queue) < s.p.Queue:
		sv.queue = append(sv.queue, r)
		sv.hop.PeakQueue = max(sv.hop.PeakQueue, len(sv.queue))
	default:
		if s.inFault(s.s.now()) {
			sv.hop.Refused++
		}
		s.respond(r, answerError)
	}
}

// begin starts hop h's handling of r on one of its threads: its own work
// first (inventory's is its whole answer).
func (s *chainSim) begin(h int, r *request) {
	work := s.p.Work
	if h == hopInventory {
		work = s.p.Latency
	}
	s.s.post(s.s.now()+work, evHandle, h, r)
}

// handle goes on with r at hop h once its own work is done: inventory and
// order's history endpoint answer; the others call the next hop through
// their group, on a goroutine (the thread blocks in Execute).
func (s *chainSim) handle(h int, r *request) {
	if h == hopInventory || h == hopOrder && r.ep == epHistory {
		s.finish(h, r, answerOK)
		return
	}
	if s.inFault(s.s.now()) {
		s.svcs[h+1].made++
	}
	s.onThread(h, r)
}

// callNext is the blocking part of hop h's handling of r, on the thread in
// ctx: the call to the next hop through the group, then the answer.
func (s *chainSim) callNext(ctx context.Context, h int, r *request) {
	g, next := s.toOrder, callCmd{sim: s, to: hopOrder, ep: r.ep, timeout: s.p.GatewayTimeout}
	if h == hopOrder {
		g, next = s.toInv, callCmd{sim: s, to: hopInventory, ep: r.ep, timeout: s.p.OrderTimeout}
	}
	a, err := command.Execute(ctx, g, next)
	if err != nil {
		a = answerError
	}
	s.finish(h, r, a)
}

// finish answers r at hop h with a and gives the thread to the next request
// waiting in the queue, or frees it.
func (s *chainSim) finish(h int, r *request, a answer) {
	sv := &s.svcs[h]
	s.respond(r, a)
	if len(sv.queue) == 0 {
		s.setBusy(sv, sv.busy-1)
		return
	}
	next := sv.queue[0]
	sv.queue[0] = nil
	sv.queue = sv.queue[1:]
	s.begin(h, next)
}

// vehicle is a goroutine that runs the blocking part of a request's
// handling (callNext); idle, it waits parked for the next.
type vehicle struct {
	th *thread
	h  int
	r  *request
}

// onThread runs callNext(h, r) now on an idle vehicle, or a new one, until
// it parks or returns. A service's threads are counted by setBusy;
// goroutines carry only the code that blocks, so that a run needs few
// hand-offs.
func (s *chainSim) onThread(h int, r *request) {
	if n := len(s.idle); n > 0 {
		v := s.idle[n-1]
		s.idle = s.idle[:n-1]
		v.h, v.r = h, r
		s.s.resume(v.th)
		return
	}
	s.s.spawn(func(th *thread) {
		ctx := context.WithValue(context.Background(), threadKey{}, th)
		v := &vehicle{th: th, h: h, r: r}
		for {
			s.callNext(ctx, v.h, v.r)
			v.r = nil
			s.idle = append(s.idle, v)
			if !th.park() {
				return
			}
		}
	})
}

// The simulation's events (scheduler.post).
const (
	evEnter  uint8 = iota // the client sends its next request
	evSend                // a caller's request r leaves for hop
	evArrive              // r, delayed by the fault, reaches hop
	evHandle              // hop's own work on r is done
	evGiveUp              // r's caller's timeout
)

// event dispatches the simulation's events.
func (s *chainSim) event(kind uint8, hop int, r *request) {
	switch kind {
	case evEnter:
		s.enter()
	case evSend:
		s.send(hop, r)
	case evArrive:
		s.arrive(hop, r)
	case evHandle:
		s.handle(hop, r)
	case evGiveUp:
		s.giveUp(r)
	}
}

// call is one attempt of a call from thread th to hop h: it sends the
// request and parks until the answer or the timeout.
func (s *chainSim) call(th *thread, h int, ep endpoint, timeout time.Duration) (answer, error) {
	r := &request{ep: ep, caller: th, deadline: s.s.now() + timeout}
	s.s.post(s.s.now(), evSend, h, r)
	s.s.post(r.deadline, evGiveUp, 0, r)
	switch {
	case !th.park():
		return answerError, errStopped
	case r.timedOut:
		return answerError, errTimeout
	case r.answer == answerError:
		return answerError, errAnswer
	}
	return r.answer, nil
}

// respond answers r with a, unless its caller has given up on it: it
// resumes the caller's thread, or counts the client's answer.
func (s *chainSim) respond(r *request, a answer) {
	if r.answered || s.s.stopping {
		return
	}
	r.answered, r.answer = true, a
	s.deliver(r)
}

// giveUp is r's caller's timeout: unless r was answered, the caller gives
// up on it.
func (s *chainSim) giveUp(r *request) {
	if r.answered {
		return
	}
	r.answered, r.timedOut, r.answer = true, true, answerError
	s.deliver(r)
}

// deliver passes r's outcome to its caller.
func (s *chainSim) deliver(r *request) {
	if r.caller == nil {
		s.count(r.answer, s.s.now())
		if r.answer == answerOK && r.ep == epHistory && s.inFault(s.s.now()) {
			s.historyOK++
		}
		return
	}
	s.s.wakeAt(s.s.now(), r.caller)
}

// count records an answer of the gateway to its client at t.
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

// setBusy sets the busy threads of sv to n now, adding the time since the
// last change within the fault to sv's integrals.
func (s *chainSim) setBusy(sv *service, n int) {
	now := s.s.now()
	if from, to := max(sv.last, s.p.FaultStart), min(now, s.p.FaultEnd); to > from {
		sv.busyArea += time.Duration(sv.busy) * (to - from)
		if sv.busy == s.p.Workers {
			sv.fullArea += to - from
		}
	}
	sv.last, sv.busy = now, n
	sv.hop.PeakBusy = max(sv.hop.PeakBusy, n)
}

// summarize computes the run's means, hops and recovery.
func (s *chainSim) summarize() {
	r, p := &s.run, s.p
	fault := p.FaultEnd - p.FaultStart
	for i := range s.svcs {
		sv := &s.svcs[i]
		s.setBusy(sv, sv.busy) // close the integrals
		sv.hop.MeanBusy = float64(sv.busyArea) / float64(fault)
		sv.hop.Full = float64(sv.fullArea) / float64(fault)
		sv.hop.Amplification = float64(sv.hop.Calls) / float64(max(s.entering, 1))
		if sv.made > 0 {
			sv.hop.PerCall = float64(sv.hop.Calls) / float64(sv.made)
		}
	}
	for _, tr := range s.tracks {
		if ts := tr.run.Transitions; len(ts) > 0 && ts[len(ts)-1].To != circuit.Closed.String() {
			tr.run.NotClosed += p.Duration - tr.since
		}
		r.Breakers = append(r.Breakers, tr.run)
	}
	mean := func(v []int, from, to time.Duration) float64 {
		return float64(sum(v, from, to)) / (to - from).Seconds()
	}
	r.OKBefore = mean(r.OK, time.Second, p.FaultStart)
	r.OKDuring = mean(r.OK, p.FaultStart, p.FaultEnd)
	r.DegradedDuring = mean(r.Degraded, p.FaultStart, p.FaultEnd)
	r.HistoryOKDuring = float64(s.historyOK) / fault.Seconds()
	r.OKAfter = mean(r.OK, p.FaultEnd, p.Duration)
	r.OKLowest, r.AnsweredLowest = math.MaxInt, math.MaxInt
	for t := p.FaultStart; t < p.FaultEnd; t += time.Second {
		ok := sum(r.OK, t, t+time.Second)
		r.OKLowest = min(r.OKLowest, ok)
		r.AnsweredLowest = min(r.AnsweredLowest, ok+sum(r.Degraded, t, t+time.Second))
	}
	r.Recovery = recovery(r.OK, time.Second, r.OKBefore, p.FaultEnd)
	r.RecoverySlot = recovery(r.OK, slot, r.OKBefore, p.FaultEnd)
}

// sum adds up the slots of counts from from to to (multiples of slot).
func sum(counts []int, from, to time.Duration) int {
	n := 0
	for _, v := range counts[from/slot : to/slot] {
		n += v
	}
	return n
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
