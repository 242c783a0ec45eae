// Command simulate replays failures on a virtual clock, with and without
// bulwark circuit breakers, and prints what the callers saw. It is
// deterministic and never sleeps. The scenarios:
//
// -scenario outage (the default) replays a downstream outage in front of one
// breaker: how many calls were forwarded or failed fast, how many reached
// the failing dependency, the latency percentiles, and every breaker
// transition with its virtual time.
//
// -scenario priority replays an overload at twice a bulkhead's capacity,
// with a plain bulkhead and with priority shedding, and prints what the
// callers of each priority (P0..P3) saw; see PriorityParams and
// docs/priority.md.
//
// -scenario chain replays a fault-injection drill on a chain of services,
// gateway → order → inventory, through bulwark's command groups: thread
// pools shared by each service's endpoints, callers' timeouts, callers'
// retries, and a fault (errors and delays) in front of inventory. It prints
// the source's figures beside the model's, without and with breakers: the
// entry's throughput, each pool's saturation, the calls per request at each
// hop, recovery and the breakers' transitions; -svg FILE also draws a chart.
// See ChainParams for the model and docs/chain-replay.md for the figures.
//
// -scenario coalesce replays a cache stampede (hot keys read from a slow
// origin) without request coalescing, with it, and with it and a
// LastGood (stale while revalidate): the origin's load and the callers'
// latency. See CoalesceParams and docs/coalescing.md.
// -scenario confidence replays a dependency that fails 40% of calls at
// random under a 0.5 threshold, at 20, 200 and 2,000 req/s, and counts the
// false trips and a real outage's detection delay for the plain ratio and
// for the confidence rule (circuit.Config.Confidence). See
// ConfidenceParams and docs/confidence.md.
//
// -scenario throttle offers a dependency twice what it can take, through a
// bulwark group without and with the client-side throttle
// (throttle.Config), and tells the load that reaches it and the
// breakers' trips. See ThrottleParams and docs/throttle.md.
//
// -scenario adaptive offers a queueing dependency half, then twice its
// capacity, and changes that capacity meanwhile, through a semaphore
// bulkhead at static limits and with the adaptive concurrency limit
// (adaptive.Config): goodput, p99 and the limit over time. See
// AdaptiveParams and docs/adaptive-limit.md.
//
// -scenario hedge offers a dependency with a long tail (2% of attempts
// take 20 times the median) calls through a bulwark group without and
// with hedged requests (hedge.Config), and tells the callers' latency
// percentiles and the extra load; then an outage, and the hedges started
// during it, before and after the breakers opened. See HedgeParams and
// docs/hedging.md.
//
//	go run ./examples/simulate                 # the outage table
//	go run ./examples/simulate -json           # one JSON object, run with the breaker
//	go run ./examples/simulate -json -breaker=false
//	go run ./examples/simulate -outage 1s-3s -open 500ms -probes 2
//	go run ./examples/simulate -scenario chain -svg docs/chain.svg
//	go run ./examples/simulate -scenario priority
//	go run ./examples/simulate -scenario chain -fault 20s-70s -duration 120s -backoff 1
//	go run ./examples/simulate -scenario confidence -confidence 0.99
//	go run ./examples/simulate -scenario throttle
//	go run ./examples/simulate -scenario adaptive
//	go run ./examples/simulate -scenario hedge
//
// Operating policies (see Policies): -halfopen-failures, -ramp and
// -ramp-up, -warmup and -health-check, and the open duration's backoff
// (-backoff, -max-open), replayed on the virtual clock; the outage table
// then also tells the recovery lag and the calls forwarded in the 30 s
// after the outage. The chain scenario's breakers default to the source's
// configuration (window 5s, open 30s doubling to at most 60s) unless these
// flags say otherwise. The breaker flags (-window to -probe-successes) and
// these apply to the outage, chain and confidence scenarios; the others set
// their own breakers and refuse them:
//
//	go run ./examples/simulate -open 5s -outage 2s-10s -duration 20s -health-check 500ms
//	go run ./examples/simulate -duration 40s -ramp-up 30s -ramp doubling
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/circuit/healthcheck"
	"github.com/bulwark-go/bulwark/metrics"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// The scenarios.
const (
	scenarioOutage     = "outage"
	scenarioChain      = "chain"
	scenarioCoalesce   = "coalesce"
	scenarioConfidence = "confidence"
	scenarioThrottle   = "throttle"
	scenarioPriority   = "priority"
	scenarioAdaptive   = "adaptive"
	scenarioHedge      = "hedge"
)

// run is the command: it parses args, simulates and prints. It returns the
// exit status: 0, 1 on a failed write, 2 on bad flags.
func run(args []string, stdout, stderr io.Writer) int {
	p, c, cp, tp := DefaultParams(), DefaultChainParams(), DefaultConfidenceParams(), DefaultThrottleParams()
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: simulate [flags]\n\nReplays failures on a virtual clock, with and without circuit breakers.")
		fs.PrintDefaults()
	}
	// owners maps each scenario-specific flag to the scenarios it applies to.
	owners := map[string][]string{}
	only := func(scenarios []string, names ...string) {
		for _, n := range names {
			owners[n] = scenarios
		}
	}
	scenario := fs.String("scenario", scenarioOutage, "`NAME` of the scenario: outage, chain, coalesce, confidence, throttle, priority, adaptive or hedge")
	duration := fs.Duration("duration", 0, "length of the simulated run (default 10s for outage, 60s for chain, 5s for coalesce, 60s for the tail runs of hedge)")
	fs.DurationVar(&p.Window, "window", p.Window, "breaker window length (chain: default 5s)")
	fs.IntVar(&p.Buckets, "buckets", p.Buckets, "breaker window buckets")
	fs.IntVar(&p.MinRequests, "min-requests", p.MinRequests, "calls in the window before the breaker may trip")
	fs.Float64Var(&p.FailureRatio, "failure-ratio", p.FailureRatio, "failure ratio that trips the breaker")
	fs.DurationVar(&p.Open, "open", p.Open, "how long the breaker stays open before probing (chain: default 30s)")
	fs.Float64Var(&p.Backoff, "backoff", p.Backoff, "multiplies the open duration after each failed half-open trial, up to -max-open (0 or 1: none; chain: default 2)")
	fs.DurationVar(&p.MaxOpen, "max-open", p.MaxOpen, "longest open duration with -backoff (0: 10 × -open; chain: default 60s)")
	fs.IntVar(&p.Probes, "probes", p.Probes, "half-open probes in flight at once")
	fs.IntVar(&p.ProbeSuccesses, "probe-successes", p.ProbeSuccesses, "consecutive probe successes that close the breaker")
	addPolicyFlags(fs, &p.Policies)

	asJSON := fs.Bool("json", false, "outage: print one JSON object, for the run selected by -breaker")
	outage := fs.String("outage", "2s-6s", "outage: `START-END` of the outage, during which every forwarded call fails")
	fs.Float64Var(&p.QPS, "qps", p.QPS, "outage: requests per second, evenly spaced")
	fs.DurationVar(&p.LatencyOK, "latency-ok", p.LatencyOK, "outage: latency of a successful call")
	fs.DurationVar(&p.LatencyFail, "latency-fail", p.LatencyFail, "outage: latency of a failed call (during the outage)")
	fs.BoolVar(&p.Breaker, "breaker", p.Breaker, "outage: with -json, report the run with the breaker (false: without)")
	only([]string{scenarioOutage}, "json", "outage", "qps", "latency-ok", "latency-fail", "breaker")

	fault := fs.String("fault", "20s-40s", "chain: `START-END` of the fault in front of inventory, in whole seconds")
	svgFile := fs.String("svg", "", "chain: also write a chart of throughput and breaker state to `FILE`")
	fs.Float64Var(&c.Rate, "rate", c.Rate, "chain: requests per second entering the gateway, evenly spaced")
	fs.Float64Var(&c.StockShare, "stock-share", c.StockShare, "chain: share of the requests for order's stock endpoint, which calls inventory")
	fs.IntVar(&c.Workers, "workers", c.Workers, "chain: threads per service, shared by all its endpoints")
	fs.IntVar(&c.Queue, "queue", c.Queue, "chain: requests that may wait per service when every thread is busy (beyond: refused)")
	fs.DurationVar(&c.Work, "work", c.Work, "chain: the gateway's and order's own work on a request")
	fs.DurationVar(&c.Latency, "latency", c.Latency, "chain: inventory's answer time")
	fs.Float64Var(&c.Errors, "errors", c.Errors, "chain: share of the calls to inventory the fault refuses with an error")
	fs.Float64Var(&c.Slow, "slow", c.Slow, "chain: share of the calls to inventory the fault delays")
	fs.DurationVar(&c.Delay, "delay", c.Delay, "chain: the fault's delay")
	fs.DurationVar(&c.ClientTimeout, "client-timeout", c.ClientTimeout, "chain: the client's timeout on the gateway")
	fs.DurationVar(&c.GatewayTimeout, "gateway-timeout", c.GatewayTimeout, "chain: the gateway's timeout on order")
	fs.DurationVar(&c.OrderTimeout, "order-timeout", c.OrderTimeout, "chain: order's timeout on inventory")
	fs.IntVar(&c.Retries, "retries", c.Retries, "chain: retries of a failed or timed-out call, by the gateway and by order")
	fs.DurationVar(&c.RetryBackoff, "retry-backoff", c.RetryBackoff, "chain: base of the retries' jittered backoff (0: retry at once)")
	fs.Float64Var(&c.RetryBudget, "retry-budget", c.RetryBudget, "chain: the groups' retry budget ratio (0: no budget)")
	fs.BoolVar(&c.Fallback, "fallback", c.Fallback, "chain: with breakers, a failed or refused call answers degraded (false: an error)")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "chain: seed of the fault, jitter and health-check draws")
	only([]string{scenarioChain}, "fault", "svg", "rate", "stock-share", "workers", "queue", "work", "latency", "errors", "slow",
		"delay", "client-timeout", "gateway-timeout", "order-timeout", "retries", "retry-backoff", "retry-budget",
		"fallback", "seed")

	fs.Float64Var(&cp.Background, "background", cp.Background, "confidence: share of calls that fail outside the outage")
	fs.Float64Var(&cp.Confidence, "confidence", cp.Confidence, "confidence: the confidence rule's circuit.Config.Confidence")
	fs.IntVar(&cp.Trials, "trials", cp.Trials, "confidence: outage runs per rate and rule, for the detection delay")
	only([]string{scenarioConfidence}, "background", "confidence", "trials")
	fs.Float64Var(&tp.Capacity, "capacity", tp.Capacity, "throttle: calls a second the dependency takes")
	fs.Float64Var(&tp.Offered, "offered", tp.Offered, "throttle: calls a second the clients make")
	only([]string{scenarioThrottle}, "capacity", "offered")
	pp := DefaultPriorityParams()
	reserve := fs.String("reserve", formatReserve(pp.Reserve), "priority: the `P0,P1,P2,P3` shares of the bulkhead kept from each priority")
	fs.Float64Var(&pp.Overload, "overload", pp.Overload, "priority: offered load as a multiple of the bulkhead's capacity")
	only([]string{scenarioPriority}, "reserve", "overload")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "simulate:", err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	if fs.NArg() > 0 {
		return fail(fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0)))
	}
	if !slices.Contains([]string{scenarioOutage, scenarioChain, scenarioCoalesce, scenarioConfidence, scenarioThrottle, scenarioPriority, scenarioAdaptive, scenarioHedge}, *scenario) {
		return fail(fmt.Errorf("%w: -scenario %q must be outage, chain, coalesce, confidence, throttle, priority, adaptive or hedge", errUsage, *scenario))
	}
	// The breaker and policy flags configure the breakers of the scenarios
	// that take them from the command line; the others set their own.
	only([]string{scenarioOutage, scenarioChain, scenarioConfidence}, "window", "buckets", "min-requests",
		"failure-ratio", "open", "backoff", "max-open", "probes", "probe-successes", "halfopen-failures", "ramp",
		"ramp-up", "warmup", "health-check")
	var misplaced error
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		if o := owners[f.Name]; o != nil && !slices.Contains(o, *scenario) && misplaced == nil {
			misplaced = fmt.Errorf("%w: -%s applies to -scenario %s only", errUsage, f.Name, orList(o))
		}
		set[f.Name] = true
	})
	if misplaced != nil {
		return fail(misplaced)
	}
	if set["duration"] {
		p.Duration, c.Duration = *duration, *duration
	}
	var err error
	if *scenario == scenarioAdaptive {
		if set["duration"] {
			return fail(fmt.Errorf("%w: -duration does not apply to -scenario adaptive (its phases are fixed: see AdaptiveParams)", errUsage))
		}
		err = runAdaptive(DefaultAdaptiveParams(), stdout)
	} else if *scenario == scenarioHedge {
		hp := DefaultHedgeParams()
		if set["duration"] {
			hp.Duration = *duration
		}
		err = runHedge(hp, stdout)
	} else if *scenario == scenarioCoalesce {
		coal := DefaultCoalesceParams()
		if set["duration"] {
			coal.Duration = *duration
		}
		err = runCoalesce(coal, stdout)
	} else if *scenario == scenarioThrottle {
		if set["duration"] {
			tp.Duration = *duration
		}
		var rows []ThrottleRow
		if rows, err = SimulateThrottle(tp); err == nil {
			err = printThrottleTable(stdout, tp, rows)
		}
	} else if *scenario == scenarioConfidence {
		for name, v := range confidenceBreakerFlags() {
			if !set[name] {
				_ = fs.Set(name, v) // a default's own text: it parses
			}
		}
		cp.BreakerParams = p.BreakerParams
		if set["duration"] {
			cp.Duration = *duration
		}
		var rows []ConfidenceRow
		if rows, err = SimulateConfidence(cp); err == nil {
			err = printConfidenceTable(stdout, cp, rows)
		}
	} else if *scenario == scenarioPriority {
		if set["duration"] {
			pp.Duration = *duration
		}
		if pp.Reserve, err = parseReserve(*reserve); err == nil {
			err = runPriority(pp, stdout)
		}
	} else if *scenario == scenarioChain {
		for name, v := range chainBreakerFlags() {
			if !set[name] {
				_ = fs.Set(name, v) // a default's own text: it parses
			}
		}
		c.BreakerParams = p.BreakerParams
		if c.FaultStart, c.FaultEnd, err = parseSpan("-fault", *fault); err == nil {
			err = runChain(c, *svgFile, stdout)
		}
	} else if p.OutageStart, p.OutageEnd, err = parseSpan("-outage", *outage); err == nil {
		err = runOutage(p, *asJSON, stdout)
	}
	if err != nil {
		return fail(err)
	}
	return 0
}

// runOutage simulates the outage scenario with and without the breaker and
// prints the table, or one run as JSON.
func runOutage(p Params, asJSON bool, stdout io.Writer) error {
	with, without := p, p
	with.Breaker, without.Breaker = true, false
	rw, err := Simulate(with)
	if err != nil {
		return err
	}
	rwo, err := Simulate(without)
	if err != nil {
		return err
	}
	if !asJSON {
		return printTable(stdout, p, rw, rwo)
	}
	if !p.Breaker {
		rw = rwo
	}
	return json.NewEncoder(stdout).Encode(rw)
}

// runChain simulates the chain scenario and prints the table; with svgFile
// set, it also writes the chart there.
func runChain(p ChainParams, svgFile string, stdout io.Writer) error {
	res, err := SimulateChain(p)
	if err != nil {
		return err
	}
	if svgFile != "" {
		if err := writeChartFile(svgFile, p, res); err != nil {
			return err
		}
	}
	return printChainTable(stdout, p, res)
}

// parseSpan parses the value of flag name, "START-END", such as "2s-6s".
func parseSpan(name, s string) (start, end time.Duration, err error) {
	a, b, ok := strings.Cut(s, "-")
	if ok {
		start, err = time.ParseDuration(a)
		if err == nil {
			end, err = time.ParseDuration(b)
		}
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("%w: %s %q must be START-END, such as 2s-6s", errUsage, name, s)
	}
	return start, end, nil
}

func printTable(w io.Writer, p Params, with, without Result) error {
	fmt.Fprintf(w, "%g req/s for %v; outage %v-%v: every forwarded call fails after %v (else succeeds after %v)\n",
		p.QPS, p.Duration, p.OutageStart, p.OutageEnd, p.LatencyFail, p.LatencyOK)
	fmt.Fprintf(w, "breaker: window %v in %d buckets, min %d requests, failure ratio %g, open %v%s, %d probe(s), %d successes to close\n\n",
		p.Window, p.Buckets, p.MinRequests, p.FailureRatio, p.Open, p.backoffText(), p.Probes, p.ProbeSuccesses)
	row := func(name string, a, b any) { fmt.Fprintf(w, "%-22s %14v %10v\n", name, a, b) }
	msd := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	row("", "with breaker", "without")
	row("requests", with.Requests, without.Requests)
	row("forwarded", with.Forwarded, without.Forwarded)
	row("  during outage", with.ForwardedDuringOutage, without.ForwardedDuringOutage)
	row("fast-failed (0 ms)", with.Rejected, without.Rejected)
	row("  during outage", with.RejectedDuringOutage, without.RejectedDuringOutage)
	row("downstream failures", with.DownstreamFailures, without.DownstreamFailures)
	row("p50 latency", msd(with.P50MS), msd(without.P50MS))
	row("p90 latency", with.P90, without.P90)
	row("p99 latency", msd(with.P99MS), msd(without.P99MS))
	row("mean latency", with.Mean, without.Mean)
	lag := "never"
	if with.RecoveryLagMS >= 0 {
		lag = msd(with.RecoveryLagMS).String()
	}
	row("recovery lag", lag, msd(without.RecoveryLagMS))
	row("forwarded 30s after", with.ForwardedAfterOutage, without.ForwardedAfterOutage)
	if p.HealthCheck > 0 {
		row("health checks", with.HealthChecks, "-")
	}
	fmt.Fprintln(w, "\ntransitions (with breaker, virtual time):")
	for _, t := range with.Transitions {
		fmt.Fprintf(w, "  %8.0f ms  %-9s -> %-9s  %s\n", t.AtMS, t.From, t.To, t.Reason)
	}
	_, err := fmt.Fprintln(w)
	return err
}

// Params describes one simulated run.
type Params struct {
	QPS                    float64       // requests per second, evenly spaced
	Duration               time.Duration // length of the run
	OutageStart, OutageEnd time.Duration // the downstream fails every call in [start, end)
	BreakerParams
	LatencyOK, LatencyFail time.Duration // what a forwarded call costs the caller
	Breaker                bool          // false: every call goes to the downstream
}

// BreakerParams configures the breakers of both scenarios.
type BreakerParams struct {
	Window         time.Duration // breaker window length
	Buckets        int           // breaker window buckets
	MinRequests    int
	FailureRatio   float64
	Open           time.Duration // breaker open duration
	Backoff        float64       // multiplies Open after each failed half-open trial; 0 or 1: no backoff
	MaxOpen        time.Duration // caps the backed-off open duration; 0: circuit's default
	Probes         int           // half-open probes in flight
	ProbeSuccesses int           // probe successes to close
	Policies                     // operating policies
}

// DefaultBreakerParams returns the defaults of the breaker flags.
func DefaultBreakerParams() BreakerParams {
	return BreakerParams{
		Window: time.Second, Buckets: 10, MinRequests: 20, FailureRatio: 0.5, Open: time.Second,
		Probes: 1, ProbeSuccesses: 3, Policies: Policies{HalfOpenFailures: 1, Ramp: rampLinear},
	}
}

// backoffText describes the open duration's backoff, if any: "" without.
func (bp BreakerParams) backoffText() string {
	if bp.Backoff <= 1 {
		return ""
	}
	return fmt.Sprintf(" (×%g after each failed trial, at most %v)", bp.Backoff, bp.maxOpen())
}

// config returns the circuit.Config of a breaker named name on clock that
// reports its transitions to onTransition; it logs nothing.
func (bp BreakerParams) config(name string, clock metrics.Clock, onTransition func(circuit.Transition)) circuit.Config {
	c := circuit.Config{
		Name:              name,
		Window:            metrics.Window{Length: bp.Window, Buckets: bp.Buckets},
		MinRequests:       bp.MinRequests,
		FailureRatio:      bp.FailureRatio,
		OpenDuration:      bp.Open,
		OpenBackoff:       bp.Backoff,
		OpenMaxDuration:   bp.MaxOpen,
		HalfOpenProbes:    bp.Probes,
		HalfOpenSuccesses: bp.ProbeSuccesses,
		Clock:             clock,
		Logger:            slog.New(slog.DiscardHandler),
		OnTransition:      onTransition,
	}
	bp.apply(&c)
	return c
}

// maxOpen is the longest backed-off open duration: MaxOpen, or circuit's
// documented default with a backoff, 10 × Open.
func (bp BreakerParams) maxOpen() time.Duration {
	if bp.MaxOpen > 0 {
		return bp.MaxOpen
	}
	return 10 * bp.Open
}

// chainBreakerFlags returns the breaker flags whose defaults differ in the
// chain scenario, with the chain's defaults as flag values.
func chainBreakerFlags() map[string]string {
	bp := chainBreakerDefaults()
	return map[string]string{
		"window": bp.Window.String(), "open": bp.Open.String(),
		"backoff": strconv.FormatFloat(bp.Backoff, 'g', -1, 64), "max-open": bp.MaxOpen.String(),
	}
}

// DefaultParams returns the defaults of the command's flags.
func DefaultParams() Params {
	return Params{
		QPS: 200, Duration: 10 * time.Second, OutageStart: 2 * time.Second, OutageEnd: 6 * time.Second,
		BreakerParams: DefaultBreakerParams(),
		LatencyOK:     8 * time.Millisecond, LatencyFail: 300 * time.Millisecond,
		Breaker: true,
	}
}

// maxRequests bounds a run so that a typo in -qps cannot eat the machine.
const maxRequests = 10_000_000

// errUsage marks an error in the parameters (exit status 2).
var errUsage = errors.New("bad parameters")

// Transition is one breaker transition at its virtual time.
type Transition struct {
	AtMS   float64 `json:"at_ms"`
	From   string  `json:"from"`
	To     string  `json:"to"`
	Reason string  `json:"reason"`
}

// transitionOf returns t as the command prints it.
func transitionOf(t circuit.Transition) Transition {
	return Transition{AtMS: ms(t.At), From: t.From.String(), To: t.To.String(), Reason: string(t.Reason)}
}

// Result is what one run measured. The JSON keys are part of the command's
// output format.
type Result struct {
	Requests              int           `json:"-"`
	Forwarded             int           `json:"forwarded"`
	Rejected              int           `json:"rejected"` // fast-failed by the breaker, 0 ms
	DownstreamFailures    int           `json:"downstream_failures"`
	ForwardedDuringOutage int           `json:"forwarded_during_outage"`
	RejectedDuringOutage  int           `json:"rejected_during_outage"`
	P50MS                 float64       `json:"p50_ms"` // latency the caller saw
	P99MS                 float64       `json:"p99_ms"`
	P90, Mean             time.Duration `json:"-"`
	Transitions           []Transition  `json:"transitions"`
	// RecoveryLagMS is how long after the outage ended the breaker closed
	// again: -1 if it did not within the run, 0 without a breaker.
	RecoveryLagMS float64 `json:"recovery_lag_ms"`
	// ForwardedAfterOutage counts the calls that reached the recovering
	// dependency in the 30 s after the outage (within the run).
	ForwardedAfterOutage int `json:"forwarded_after_outage"`
	HealthChecks         int `json:"health_checks"` // checks run (-health-check)
}

// Simulate replays p on a virtual clock: request i arrives at i/QPS; an
// admitted request is forwarded and its outcome recorded at the same instant;
// a refused one costs the caller 0 ms. Nothing sleeps.
func Simulate(p Params) (Result, error) {
	if err := p.validate(); err != nil {
		return Result{}, err
	}
	clock := new(metrics.ManualClock)
	res := Result{Transitions: []Transition{}}
	inOutage := func(at time.Duration) bool { return at >= p.OutageStart && at < p.OutageEnd }
	checks := healthChecks{interval: p.HealthCheck, next: never}
	var b *circuit.Breaker
	if p.Breaker {
		cfg := p.config("downstream", clock, func(t circuit.Transition) {
			res.Transitions = append(res.Transitions, transitionOf(t))
			checks.transition(t)
		})
		var err error
		if b, err = circuit.New(cfg); err != nil {
			return Result{}, fmt.Errorf("%w: %w", errUsage, err)
		}
		if p.HealthCheck > 0 {
			checks.checker, err = healthcheck.Start(b, healthcheck.Config{
				Check: func(context.Context) error {
					if inOutage(clock.Now()) {
						return errDown
					}
					return nil
				},
				Interval: healthcheck.Manual, // run on the virtual clock by checks
			})
			if err != nil {
				return Result{}, fmt.Errorf("%w: %w", errUsage, err)
			}
			defer checks.checker.Stop()
		}
	}

	var seen []time.Duration // latency each caller saw
	for i := 0; ; i++ {
		at := time.Duration(float64(i) * float64(time.Second) / p.QPS)
		if at >= p.Duration {
			break
		}
		if checks.checker != nil {
			checks.runUntil(at, clock.Set)
		}
		clock.Set(at)
		outage := inOutage(at)
		var permit circuit.Permit
		if b != nil {
			var err error
			if permit, err = b.Allow(); err != nil {
				res.Rejected++
				if outage {
					res.RejectedDuringOutage++
				}
				seen = append(seen, 0)
				continue
			}
		}
		res.Forwarded++
		if at >= p.OutageEnd && at < p.OutageEnd+afterOutage {
			res.ForwardedAfterOutage++
		}
		if outage {
			res.ForwardedDuringOutage++
			res.DownstreamFailures++
			permit.Record(metrics.Failure, p.LatencyFail)
			seen = append(seen, p.LatencyFail)
		} else {
			permit.Record(metrics.Success, p.LatencyOK)
			seen = append(seen, p.LatencyOK)
		}
	}
	res.Requests = len(seen)
	res.HealthChecks = checks.run
	res.RecoveryLagMS = recoveryLag(p, b != nil, res.Transitions)
	slices.Sort(seen)
	var sum time.Duration
	for _, d := range seen {
		sum += d
	}
	res.Mean = sum / time.Duration(len(seen))
	res.P50MS, res.P90, res.P99MS = ms(percentile(seen, 50)), percentile(seen, 90), ms(percentile(seen, 99))
	return res, nil
}

func (p Params) validate() error {
	switch {
	case !(p.QPS > 0) || math.IsInf(p.QPS, 0):
		return usage("-qps %v must be a positive number", p.QPS)
	case p.Duration <= 0:
		return usage("-duration %v must be positive", p.Duration)
	case p.QPS*p.Duration.Seconds() > maxRequests:
		return usage("-qps %v for -duration %v is more than %d requests", p.QPS, p.Duration, maxRequests)
	case p.OutageStart < 0 || p.OutageEnd <= p.OutageStart:
		return usage("-outage %v-%v must be START-END with 0 <= START < END", p.OutageStart, p.OutageEnd)
	case p.LatencyOK < 0:
		return usage("-latency-ok %v must not be negative", p.LatencyOK)
	case p.LatencyFail < 0:
		return usage("-latency-fail %v must not be negative", p.LatencyFail)
	}
	return p.Policies.validate()
}

// recoveryLag returns Result.RecoveryLagMS for the transitions of a run.
func recoveryLag(p Params, breaker bool, ts []Transition) float64 {
	if !breaker {
		return 0
	}
	for _, t := range ts {
		if t.To == "closed" && t.AtMS >= ms(p.OutageEnd) {
			return t.AtMS - ms(p.OutageEnd)
		}
	}
	return -1
}

// percentile returns the nearest-rank q-th percentile of sorted values.
func percentile(sorted []time.Duration, q float64) time.Duration {
	rank := int(math.Ceil(q / 100 * float64(len(sorted))))
	return sorted[max(rank-1, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// usage returns a usage error (it wraps errUsage).
func usage(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
}

// orList joins names as "a", "a or b", "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
