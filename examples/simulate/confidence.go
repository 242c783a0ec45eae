package main

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/metrics"
)

// ConfidenceParams describes the confidence scenario: a dependency that
// fails a steady share of calls at random (Background), under a breaker
// whose threshold (FailureRatio) is above that share, at each traffic rate
// of Rates. Each rate runs once for Duration with the plain ratio and once
// with the confidence rule (circuit.Config.Confidence): every trip there
// is a false trip. Then, for the detection delay, Trials runs per rate and
// rule fill the window with background for Lead and start a real outage
// (every call fails).
type ConfidenceParams struct {
	Rates      []float64     // requests per second, evenly spaced
	Duration   time.Duration // length of each background run
	Background float64       // share of calls that fail outside the outage
	Confidence float64       // the confidence rule's setting
	Trials     int           // outage runs per rate and rule
	Lead       time.Duration // background before the outage in each of them
	Seed       uint64        // seed of the failures' draws
	BreakerParams
}

// DefaultConfidenceParams returns the defaults of the confidence scenario:
// 40% background failures under a 0.5 threshold, 20, 200 and 2,000 req/s
// for 10 minutes each, circuit's default breaker (10 s window in 10
// buckets, 20 calls minimum, open 5 s, 3 probes to close), confidence 0.95.
func DefaultConfidenceParams() ConfidenceParams {
	return ConfidenceParams{
		Rates: []float64{20, 200, 2000}, Duration: 10 * time.Minute, Background: 0.4,
		Confidence: 0.95, Trials: 20, Lead: 30 * time.Second, Seed: 1,
		BreakerParams: BreakerParams{
			Window: 10 * time.Second, Buckets: 10, MinRequests: 20, FailureRatio: 0.5,
			Open: 5 * time.Second, Probes: 1, ProbeSuccesses: 3, Policies: Policies{HalfOpenFailures: 1, Ramp: rampLinear},
		},
	}
}

// confidenceBreakerFlags returns the breaker flags whose defaults differ
// in the confidence scenario, with its defaults as flag values.
func confidenceBreakerFlags() map[string]string {
	bp := DefaultConfidenceParams().BreakerParams
	return map[string]string{"window": bp.Window.String(), "open": bp.Open.String()}
}

// ConfidenceRow is what one rate measured under one rule.
type ConfidenceRow struct {
	Rate       float64 `json:"rate"`
	Rule       string  `json:"rule"`        // "ratio" or "wilson"
	FalseTrips int     `json:"false_trips"` // closed → open in the background run
	// LeadTrips counts the false trips in the outage trials' background
	// leads: a fresh window of MinRequests calls is the noisiest.
	LeadTrips int `json:"lead_false_trips"`
	// NotClosed is the share of the background run the breaker spent open
	// or half-open: the traffic a false trip refused.
	NotClosed float64 `json:"not_closed"`
	// Detection delays of the outage trials, from the outage's start to
	// the trip: median and worst. Trials the breaker entered open or
	// half-open (a false trip just before) are left out and counted.
	MedianDelay, MaxDelay time.Duration
	Skipped               int `json:"skipped_trials"`
}

// The rules the scenario compares.
const (
	ruleRatio  = "ratio"
	ruleWilson = "wilson"
)

// SimulateConfidence runs the confidence scenario: one row per rate and
// rule, the plain ratio first.
func SimulateConfidence(p ConfidenceParams) ([]ConfidenceRow, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	var rows []ConfidenceRow
	for i, rate := range p.Rates {
		for _, rule := range []string{ruleRatio, ruleWilson} {
			row := ConfidenceRow{Rate: rate, Rule: rule}
			seed := p.Seed + uint64(i)*1000 // both rules see the same draws
			bg, err := p.run(rule, rate, seed, p.Duration, never)
			if err != nil {
				return nil, err
			}
			row.FalseTrips, row.NotClosed = bg.trips, float64(bg.notClosed)/float64(p.Duration)
			var delays []time.Duration
			for k := range p.Trials {
				tr, err := p.run(rule, rate, seed+uint64(k)+1, p.Lead+p.Window, p.Lead)
				if err != nil {
					return nil, err
				}
				row.LeadTrips += tr.trips
				if tr.delay < 0 {
					row.Skipped++
					continue
				}
				delays = append(delays, tr.delay)
			}
			if len(delays) > 0 {
				slices.Sort(delays)
				row.MedianDelay, row.MaxDelay = delays[len(delays)/2], delays[len(delays)-1]
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// confidenceRun is what one run of the scenario saw.
type confidenceRun struct {
	trips     int           // closed → open transitions before the outage
	notClosed time.Duration // time spent open or half-open before the outage
	delay     time.Duration // outage start to the trip; -1: not closed at the start, or no trip
}

// run replays length of traffic at rate under rule with the failures drawn
// from seed; every call from outage on fails.
func (p ConfidenceParams) run(rule string, rate float64, seed uint64, length, outage time.Duration) (confidenceRun, error) {
	clock := new(metrics.ManualClock)
	r := confidenceRun{delay: -1}
	closedAtOutage, checked := true, false
	var left time.Duration // when the breaker last left closed
	cfg := p.config(rule, clock, func(t circuit.Transition) {
		switch {
		case t.At >= outage:
			if t.From == circuit.Closed && t.To == circuit.Open && closedAtOutage && r.delay < 0 {
				r.delay = t.At - outage
			}
		case t.From == circuit.Closed:
			r.trips++
			left = t.At
		case t.To == circuit.Closed:
			r.notClosed += t.At - left
		}
	})
	cfg.Logger = slog.New(slog.DiscardHandler)
	if rule == ruleWilson {
		cfg.Confidence = p.Confidence
	}
	b, err := circuit.New(cfg)
	if err != nil {
		return r, fmt.Errorf("%w: %w", errUsage, err)
	}
	draws := rand.New(rand.NewPCG(seed, 5))
	for i := 0; ; i++ {
		at := time.Duration(float64(i) * float64(time.Second) / rate)
		if at >= length {
			break
		}
		clock.Set(at)
		if at >= outage && !checked {
			checked, closedAtOutage = true, b.State() == circuit.Closed
		}
		fails := draws.Float64() < p.Background || at >= outage
		permit, err := b.Allow()
		if err != nil {
			continue
		}
		if fails {
			permit.Record(metrics.Failure, 0)
		} else {
			permit.Record(metrics.Success, 0)
		}
	}
	if st := b.State(); st != circuit.Closed && outage == never {
		r.notClosed += length - left
	}
	return r, nil
}

func (p ConfidenceParams) validate() error {
	switch {
	case len(p.Rates) == 0:
		return usage("-rates: at least one rate")
	case p.Duration <= 0:
		return usage("-duration %v must be positive", p.Duration)
	case !(p.Background >= 0 && p.Background < 1):
		return usage("-background %v must be in [0, 1)", p.Background)
	case p.Trials < 1:
		return usage("-trials %d must be at least 1", p.Trials)
	case p.Lead <= 0:
		return usage("-lead %v must be positive", p.Lead)
	}
	for _, r := range p.Rates {
		if !(r > 0) || r*max(p.Duration, p.Lead+p.Window).Seconds() > maxRequests {
			return usage("-rates: %v must be positive, at most %d requests per run", r, maxRequests)
		}
	}
	return nil
}

// printConfidenceTable prints the rows against the scenario's targets.
func printConfidenceTable(w io.Writer, p ConfidenceParams, rows []ConfidenceRow) error {
	fmt.Fprintf(w, "background failures %g%%, threshold %g, %v per rate; outage after %v of background, %d trials per rate\n",
		p.Background*100, p.FailureRatio, p.Duration, p.Lead, p.Trials)
	fmt.Fprintf(w, "breaker: window %v in %d buckets, min %d requests, open %v, %d successes to close; wilson: confidence %g\n\n",
		p.Window, p.Buckets, p.MinRequests, p.Open, p.ProbeSuccesses, p.Confidence)
	fmt.Fprintf(w, "%8s  %-6s  %11s  %10s  %10s  %12s  %10s  %7s\n",
		"req/s", "rule", "false trips", "not closed", "lead trips", "median delay", "max delay", "skipped")
	for _, r := range rows {
		fmt.Fprintf(w, "%8g  %-6s  %11d  %9.1f%%  %10d  %12v  %10v  %7d\n",
			r.Rate, r.Rule, r.FalseTrips, r.NotClosed*100, r.LeadTrips, r.MedianDelay, r.MaxDelay, r.Skipped)
	}
	fmt.Fprintln(w, "\nfalse trips, not closed: the background run; lead trips: false trips in the trials' leads;")
	fmt.Fprintln(w, "delay: outage start to trip over the trials; skipped: trials not closed when the outage began")
	_, err := fmt.Fprintln(w)
	return err
}
