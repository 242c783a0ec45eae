// Command simulate replays a downstream outage on a virtual clock, with and
// without a bulwark circuit breaker, and prints what the callers saw: how many
// calls were forwarded or failed fast, how many reached the failing
// dependency, the latency percentiles, and every breaker transition with its
// virtual time. It is deterministic and never sleeps.
//
//	go run ./examples/simulate                 # the table
//	go run ./examples/simulate -json           # one JSON object, run with the breaker
//	go run ./examples/simulate -json -breaker=false
//	go run ./examples/simulate -outage 1s-3s -open 500ms -probes 2
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/metrics"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the command: it parses args, simulates and prints. It returns the
// exit status: 0, 1 on a failed write, 2 on bad flags.
func run(args []string, stdout, stderr io.Writer) int {
	p := DefaultParams()
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: simulate [flags]\n\nReplays a downstream outage on a virtual clock, with and without a circuit breaker.")
		fs.PrintDefaults()
	}
	outage := fs.String("outage", "2s-6s", "`START-END` of the outage, during which every forwarded call fails")
	asJSON := fs.Bool("json", false, "print one JSON object for the run selected by -breaker")
	fs.Float64Var(&p.QPS, "qps", p.QPS, "requests per second, evenly spaced")
	fs.DurationVar(&p.Duration, "duration", p.Duration, "length of the simulated run")
	fs.DurationVar(&p.Window, "window", p.Window, "breaker window length")
	fs.IntVar(&p.Buckets, "buckets", p.Buckets, "breaker window buckets")
	fs.IntVar(&p.MinRequests, "min-requests", p.MinRequests, "calls in the window before the breaker may trip")
	fs.Float64Var(&p.FailureRatio, "failure-ratio", p.FailureRatio, "failure ratio that trips the breaker")
	fs.DurationVar(&p.Open, "open", p.Open, "how long the breaker stays open before probing")
	fs.IntVar(&p.Probes, "probes", p.Probes, "half-open probes in flight at once")
	fs.IntVar(&p.ProbeSuccesses, "probe-successes", p.ProbeSuccesses, "consecutive probe successes that close the breaker")
	fs.DurationVar(&p.LatencyOK, "latency-ok", p.LatencyOK, "latency of a successful call")
	fs.DurationVar(&p.LatencyFail, "latency-fail", p.LatencyFail, "latency of a failed call (during the outage)")
	fs.BoolVar(&p.Breaker, "breaker", p.Breaker, "with -json: report the run with the breaker (false: without)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "simulate: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	var err error
	if p.OutageStart, p.OutageEnd, err = parseOutage(*outage); err != nil {
		fmt.Fprintln(stderr, "simulate:", err)
		return 2
	}

	with, without := p, p
	with.Breaker, without.Breaker = true, false
	rw, err := Simulate(with)
	if err == nil {
		var rwo Result
		rwo, err = Simulate(without)
		if err == nil {
			if *asJSON {
				sel := rw
				if !p.Breaker {
					sel = rwo
				}
				err = json.NewEncoder(stdout).Encode(sel)
			} else {
				err = printTable(stdout, p, rw, rwo)
			}
			if err != nil {
				fmt.Fprintln(stderr, "simulate:", err)
				return 1
			}
			return 0
		}
	}
	fmt.Fprintln(stderr, "simulate:", err)
	return 2
}

// parseOutage parses "START-END", such as "2s-6s".
func parseOutage(s string) (start, end time.Duration, err error) {
	a, b, ok := strings.Cut(s, "-")
	if ok {
		start, err = time.ParseDuration(a)
		if err == nil {
			end, err = time.ParseDuration(b)
		}
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("%w: -outage %q must be START-END, such as 2s-6s", errUsage, s)
	}
	return start, end, nil
}

func printTable(w io.Writer, p Params, with, without Result) error {
	fmt.Fprintf(w, "%g req/s for %v; outage %v-%v: every forwarded call fails after %v (else succeeds after %v)\n",
		p.QPS, p.Duration, p.OutageStart, p.OutageEnd, p.LatencyFail, p.LatencyOK)
	fmt.Fprintf(w, "breaker: window %v in %d buckets, min %d requests, failure ratio %g, open %v, %d probe(s), %d successes to close\n\n",
		p.Window, p.Buckets, p.MinRequests, p.FailureRatio, p.Open, p.Probes, p.ProbeSuccesses)
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
	Window                 time.Duration // breaker window length
	Buckets                int           // breaker window buckets
	MinRequests            int
	FailureRatio           float64
	Open                   time.Duration // breaker open duration
	Probes                 int           // half-open probes in flight
	ProbeSuccesses         int           // probe successes to close
	LatencyOK, LatencyFail time.Duration // what a forwarded call costs the caller
	Breaker                bool          // false: every call goes to the downstream
}

// DefaultParams returns the defaults of the command's flags.
func DefaultParams() Params {
	return Params{
		QPS: 200, Duration: 10 * time.Second, OutageStart: 2 * time.Second, OutageEnd: 6 * time.Second,
		Window: time.Second, Buckets: 10, MinRequests: 20, FailureRatio: 0.5, Open: time.Second,
		Probes: 1, ProbeSuccesses: 3, LatencyOK: 8 * time.Millisecond, LatencyFail: 300 * time.Millisecond,
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
	var b *circuit.Breaker
	if p.Breaker {
		var err error
		b, err = circuit.New(circuit.Config{
			Name:              "downstream",
			Window:            metrics.Window{Length: p.Window, Buckets: p.Buckets},
			MinRequests:       p.MinRequests,
			FailureRatio:      p.FailureRatio,
			OpenDuration:      p.Open,
			HalfOpenProbes:    p.Probes,
			HalfOpenSuccesses: p.ProbeSuccesses,
			Clock:             clock,
			Logger:            slog.New(slog.DiscardHandler),
			OnTransition: func(t circuit.Transition) {
				res.Transitions = append(res.Transitions, Transition{
					AtMS: ms(t.At), From: t.From.String(), To: t.To.String(), Reason: string(t.Reason),
				})
			},
		})
		if err != nil {
			return Result{}, fmt.Errorf("%w: %w", errUsage, err)
		}
	}

	var seen []time.Duration // latency each caller saw
	for i := 0; ; i++ {
		at := time.Duration(float64(i) * float64(time.Second) / p.QPS)
		if at >= p.Duration {
			break
		}
		clock.Set(at)
		outage := at >= p.OutageStart && at < p.OutageEnd
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
		if outage {
			res.ForwardedDuringOutage++
			res.DownstreamFailures++
			permit.Record(circuit.Failure, p.LatencyFail)
			seen = append(seen, p.LatencyFail)
		} else {
			permit.Record(circuit.Success, p.LatencyOK)
			seen = append(seen, p.LatencyOK)
		}
	}
	res.Requests = len(seen)
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
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
	}
	switch {
	case !(p.QPS > 0) || math.IsInf(p.QPS, 0):
		return bad("-qps %v must be a positive number", p.QPS)
	case p.Duration <= 0:
		return bad("-duration %v must be positive", p.Duration)
	case p.QPS*p.Duration.Seconds() > maxRequests:
		return bad("-qps %v for -duration %v is more than %d requests", p.QPS, p.Duration, maxRequests)
	case p.OutageStart < 0 || p.OutageEnd <= p.OutageStart:
		return bad("-outage %v-%v must be START-END with 0 <= START < END", p.OutageStart, p.OutageEnd)
	case p.LatencyOK < 0:
		return bad("-latency-ok %v must not be negative", p.LatencyOK)
	case p.LatencyFail < 0:
		return bad("-latency-fail %v must not be negative", p.LatencyFail)
	}
	return nil
}

// percentile returns the nearest-rank q-th percentile of sorted values.
func percentile(sorted []time.Duration, q float64) time.Duration {
	rank := int(math.Ceil(q / 100 * float64(len(sorted))))
	return sorted[max(rank-1, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
