package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/throttle"
	"github.com/bulwark-go/bulwark/metrics"
)

// ThrottleParams describes the throttle scenario: a dependency that can
// take Capacity calls a second (at most Capacity/10 in each 100 ms; it
// refuses the rest at once with an error, as an overloaded server answers
// 503), offered Offered calls a second, evenly spaced, for Duration,
// through a bulwark group with circuit's default breakers (the group's
// and the command's), without a throttle and with one for each K in Ks.
type ThrottleParams struct {
	Capacity float64       // calls a second the dependency takes
	Offered  float64       // calls a second the clients make
	Duration time.Duration // length of each run
	Settle   time.Duration // the figures leave out the start, while the windows fill
	Ks       []float64     // the throttles compared (beside the run without one)
	Seed     uint64        // seed of the throttle's draws
}

// DefaultThrottleParams returns the defaults of the throttle scenario: a
// dependency at 50% of the offered load (100 of 200 calls a second) for
// 5 virtual minutes, the first 30 s left out, K 2 (the SRE book's), 1.5 and 1.1.
func DefaultThrottleParams() ThrottleParams {
	return ThrottleParams{Capacity: 100, Offered: 200, Duration: 5 * time.Minute, Settle: 30 * time.Second,
		Ks: []float64{2, 1.5, 1.1}, Seed: 1}
}

// ThrottleRow is what one run measured after Settle.
type ThrottleRow struct {
	K         float64 `json:"k"`          // 0: no throttle
	Sent      float64 `json:"sent"`       // calls a second that reached the dependency
	Accepted  float64 `json:"accepted"`   // calls a second it took (goodput)
	Throttled float64 `json:"throttled"`  // calls a second the throttle refused
	Shorted   float64 `json:"shorted"`    // calls a second the breakers refused
	Trips     int     `json:"trips"`      // breaker transitions to open (both breakers), whole run
	MinSent   float64 `json:"min_sent"`   // the lowest of the seconds' sent counts
	MaxSent   float64 `json:"max_sent"`   // the highest
	Wasted    float64 `json:"wasted_pct"` // share of the sent calls the dependency refused
}

// SimulateThrottle runs the scenario: the run without a throttle first,
// then one per K.
func SimulateThrottle(p ThrottleParams) ([]ThrottleRow, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	rows := make([]ThrottleRow, 0, 1+len(p.Ks))
	for _, k := range append([]float64{0}, p.Ks...) {
		r, err := p.run(k)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// errOverloaded is the dependency's refusal of a call above its capacity.
var errOverloaded = errors.New("503: overloaded")

// run replays the scenario with a throttle of K k (0: none).
func (p ThrottleParams) run(k float64) (ThrottleRow, error) {
	row := ThrottleRow{K: k}
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	defer func() { _ = reg.Close(context.Background()) }()
	trip := func(t circuit.Transition) {
		if t.To == circuit.Open {
			row.Trips++
		}
	}
	cfg := command.GroupConfig{Strategy: command.Semaphore, MaxConcurrent: 1, Timeout: command.NoTimeout,
		Breaker: circuit.Config{OnTransition: trip}, CommandBreaker: circuit.Config{OnTransition: trip}}
	if k > 0 {
		cfg.Throttle = throttle.Config{K: k, Rand: rand.New(rand.NewPCG(p.Seed, 7)).Float64}
	}
	g, err := reg.NewGroup("dependency", cfg)
	if err != nil {
		return row, fmt.Errorf("%w: %w", errUsage, err)
	}
	perSlice := int(p.Capacity / 10)
	var slice time.Duration = -1
	taken := 0
	call := command.Func("call", func(context.Context) (struct{}, error) {
		if s := clock.Now() / (100 * time.Millisecond); s != slice {
			slice, taken = s, 0
		}
		if taken >= perSlice {
			return struct{}{}, errOverloaded
		}
		taken++
		return struct{}{}, nil
	}, nil)

	var counts [4]int // sent, accepted, throttled, short-circuited after Settle
	var second time.Duration = -1
	sentThisSecond := 0
	row.MinSent = p.Offered
	closeSecond := func() {
		if second >= 0 && second*time.Second >= p.Settle {
			row.MinSent = min(row.MinSent, float64(sentThisSecond))
			row.MaxSent = max(row.MaxSent, float64(sentThisSecond))
		}
	}
	n := int(p.Offered * p.Duration.Seconds())
	for i := range n {
		at := time.Duration(float64(i) * float64(time.Second) / p.Offered)
		clock.Set(at)
		if s := at / time.Second; s != second {
			closeSecond()
			second, sentThisSecond = s, 0
		}
		_, info, _ := command.ExecuteInfo(context.Background(), g, call)
		sent := info.Event == metrics.Success || info.Event == metrics.Failure
		if sent {
			sentThisSecond++
		}
		if at < p.Settle {
			continue
		}
		switch {
		case sent:
			counts[0]++
			if info.Event == metrics.Success {
				counts[1]++
			}
		case info.Event == metrics.Throttled:
			counts[2]++
		case info.Event == metrics.ShortCircuited:
			counts[3]++
		}
	}
	closeSecond()
	secs := (p.Duration - p.Settle).Seconds()
	row.Sent, row.Accepted = float64(counts[0])/secs, float64(counts[1])/secs
	row.Throttled, row.Shorted = float64(counts[2])/secs, float64(counts[3])/secs
	if counts[0] > 0 {
		row.Wasted = 100 * float64(counts[0]-counts[1]) / float64(counts[0])
	}
	return row, nil
}

func (p ThrottleParams) validate() error {
	switch {
	case !(p.Capacity >= 10) || p.Capacity > 1e5:
		return usage("-capacity %v must be between 10 and 100000 calls a second", p.Capacity)
	case !(p.Offered > 0) || p.Offered*p.Duration.Seconds() > maxRequests:
		return usage("-offered %v must be positive, at most %d calls per run", p.Offered, maxRequests)
	case p.Duration <= p.Settle:
		return usage("-duration %v must be longer than the %v left out while the windows fill", p.Duration, p.Settle)
	}
	for _, k := range p.Ks {
		if !(k >= 1) {
			return usage("K %v must be at least 1", k)
		}
	}
	return nil
}

// printThrottleTable prints the rows.
func printThrottleTable(w io.Writer, p ThrottleParams, rows []ThrottleRow) error {
	fmt.Fprintf(w, "dependency takes %g calls/s (refuses the rest at once), offered %g calls/s for %v; figures after the first %v\n",
		p.Capacity, p.Offered, p.Duration, p.Settle)
	fmt.Fprintln(w, "breakers: circuit's defaults (window 10s, 20 calls minimum, ratio 0.5, open 5s), the group's and the command's")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-11s  %8s  %11s  %8s  %10s  %9s  %15s  %11s  %11s\n",
		"throttle", "sent/s", "sent/cap", "taken/s", "throttled/s", "shorted/s", "sent/s min-max", "refused %", "trips")
	for _, r := range rows {
		name := "none"
		if r.K > 0 {
			name = fmt.Sprintf("K %g", r.K)
		}
		fmt.Fprintf(w, "%-11s  %8.1f  %10.2f×  %8.1f  %11.1f  %9.1f  %15s  %10.1f%%  %11d\n",
			name, r.Sent, r.Sent/p.Capacity, r.Accepted, r.Throttled, r.Shorted,
			fmt.Sprintf("%g-%g", r.MinSent, r.MaxSent), r.Wasted, r.Trips)
	}
	_, err := fmt.Fprintln(w)
	return err
}
