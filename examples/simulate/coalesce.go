package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/fallback"
	"github.com/bulwark-go/bulwark/metrics"
)

// CoalesceParams describes the coalesce scenario, a cache stampede: Rate
// requests per second, evenly spaced, read Keys hot keys in turn from an
// origin that answers each read after Latency, for Duration. Each request
// is a real command.Execute on a virtual clock: every read's Run blocks
// until the scenario ends it at its virtual end, and the scenario waits,
// until each call has started its Run or been answered, and, before a Run
// ends, until every call that came for it has joined it
// (CommandSnapshot.Coalescing), so that a run is deterministic. It is replayed three times: without coalescing, with
// CommandConfig.Coalesce, and with Coalesce and a LastGood of maximum age
// MaxAge (stale while revalidate).
type CoalesceParams struct {
	Rate     float64       // requests per second, evenly spaced
	Keys     int           // hot keys, read in turn
	Latency  time.Duration // the origin's answer time
	MaxAge   time.Duration // the LastGood's maximum age (stale mode)
	Duration time.Duration // length of the run
}

// DefaultCoalesceParams returns the coalesce scenario's defaults.
func DefaultCoalesceParams() CoalesceParams {
	return CoalesceParams{Rate: 2000, Keys: 10, Latency: 100 * time.Millisecond, MaxAge: time.Second, Duration: 5 * time.Second}
}

func (p CoalesceParams) validate() error {
	switch {
	case p.Duration <= 0:
		return usage("-duration %v must be positive", p.Duration)
	case p.Rate*p.Duration.Seconds() > 1_000_000:
		return usage("-duration %v: more than 1,000,000 requests", p.Duration)
	}
	return nil
}

// The coalesce scenario's modes.
const (
	coalesceOff   = "off"
	coalesceOn    = "coalesce"
	coalesceStale = "coalesce+LastGood"
)

// CoalesceResult is what one mode of the coalesce scenario measured.
type CoalesceResult struct {
	Mode               string
	Calls, Runs        int           // callers' calls; Runs the origin saw
	PeakRuns           int           // most Runs in flight at once
	Success, Coalesced int64         // the command's SUCCESS and COALESCED counts
	Degraded           int           // calls answered with the last good value
	P50, P90, P99, Max time.Duration // the callers' latency
	BreakerCounted     int64         // calls the command's breaker counted
	CallsPerRun        float64
	PeakRunsPerSecond  int
}

// stampede is one replay: the origin's Runs in flight and the calls that
// wait for them.
type stampede struct {
	started chan chan struct{} // each Run hands its release here, and waits for it
	keyed   chan struct{}      // each call's Key says here that the call has begun (coalescing only)
}

// read is the command: one read of key from the origin.
type read struct {
	key string
	s   *stampede
}

func (r read) Name() string { return "read" }
func (r read) Key() string {
	r.s.keyed <- struct{}{}
	return r.key
}
func (r read) Run(context.Context) (int, error) {
	release := make(chan struct{})
	r.s.started <- release
	<-release
	return len(r.key), nil
}

// cachedRead is read with a LastGood fallback that Run keeps up to date.
type cachedRead struct {
	read
	*fallback.LastGood[int]
}

func (c cachedRead) Run(ctx context.Context) (int, error) {
	v, err := c.read.Run(ctx)
	if err == nil {
		c.Store(v)
	}
	return v, err
}

// SimulateCoalesce replays p in each mode.
func SimulateCoalesce(p CoalesceParams) ([]CoalesceResult, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	var out []CoalesceResult
	for _, mode := range []string{coalesceOff, coalesceOn, coalesceStale} {
		r, err := replayStampede(p, mode)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// flightRun is one Run in flight in a replay: when it ends, and the calls
// waiting for its answer (the first is the one that started it).
type flightRun struct {
	key     string
	end     time.Duration
	release chan struct{}
	callers []chan command.Info
}

// replayStampede replays p in one mode.
func replayStampede(p CoalesceParams, mode string) (CoalesceResult, error) {
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	defer reg.Close(context.Background())
	g, err := reg.NewGroup("origin", command.GroupConfig{Strategy: command.Semaphore, MaxConcurrent: 100_000,
		Timeout: command.NoTimeout, Commands: map[string]command.CommandConfig{"read": {Coalesce: mode != coalesceOff}}})
	if err != nil {
		return CoalesceResult{}, err
	}
	s := &stampede{started: make(chan chan struct{}), keyed: make(chan struct{})}
	cache := map[string]*fallback.LastGood[int]{}
	res := CoalesceResult{Mode: mode}
	var latencies []time.Duration
	inFlight := map[string]*flightRun{} // by key, when coalescing
	var ends []*flightRun               // in order of their end (the latency is constant)
	waiting := int64(0)                 // calls that joined a Run and wait for it
	perSecond := map[int64]int{}

	answered := func(ch chan command.Info) error {
		select {
		case info := <-ch:
			latencies = append(latencies, info.Latency)
			if info.Degraded {
				res.Degraded++
			}
			return nil
		case <-time.After(10 * time.Second):
			return fmt.Errorf("coalesce: a call was not answered within 10 s")
		}
	}
	endRun := func(r *flightRun) error {
		// Every call that came for a Run in flight must have joined it
		// before one ends: else it would find no flight and start its own.
		if err := waitCoalescing(g, waiting); err != nil {
			return err
		}
		clock.Set(r.end)
		if inFlight[r.key] == r {
			delete(inFlight, r.key)
		}
		close(r.release)
		for _, ch := range r.callers {
			if err := answered(ch); err != nil {
				return err
			}
		}
		waiting -= int64(len(r.callers) - 1)
		return nil
	}
	n := int(p.Rate * p.Duration.Seconds())
	for i := 0; i < n; i++ {
		at := time.Duration(float64(i) * float64(time.Second) / p.Rate)
		for len(ends) > 0 && ends[0].end <= at { // a Run that ends at this instant answers first
			if err := endRun(ends[0]); err != nil {
				return res, err
			}
			ends = ends[1:]
		}
		clock.Set(at)
		key := "key-" + strconv.Itoa(i%p.Keys)
		var cmd command.Runner[int] = read{key, s}
		if mode == coalesceStale {
			if cache[key] == nil {
				cache[key], _ = fallback.NewLastGood[int](p.MaxAge, clock)
			}
			cmd = cachedRead{read{key, s}, cache[key]}
		}
		ch := make(chan command.Info, 1)
		go func() {
			_, info, _ := command.ExecuteInfo(context.Background(), g, cmd)
			ch <- info
		}()
		res.Calls++
		if mode != coalesceOff { // the call reads its start at this instant
			if _, err := receive(s.keyed, "a call's key"); err != nil {
				return res, fmt.Errorf("coalesce: %w", err)
			}
		}
		if r := inFlight[key]; r != nil {
			if lg := cache[key]; lg != nil {
				if _, age, ok := lg.Load(); ok && age <= p.MaxAge { // answered at once
					if err := answered(ch); err != nil {
						return res, err
					}
					continue
				}
			}
			r.callers = append(r.callers, ch)
			waiting++
			continue
		}
		release, err := receive(s.started, "a Run's start")
		if err != nil {
			return res, fmt.Errorf("coalesce: %w", err)
		}
		res.Runs++
		perSecond[int64(at/time.Second)]++
		r := &flightRun{key: key, end: at + p.Latency, release: release, callers: []chan command.Info{ch}}
		if mode != coalesceOff {
			inFlight[key] = r
		}
		ends = append(ends, r)
		res.PeakRuns = max(res.PeakRuns, len(ends))
	}
	for _, r := range ends {
		if err := endRun(r); err != nil {
			return res, err
		}
	}
	snap := g.Snapshot()
	c := snap.Commands[0]
	res.Success, res.Coalesced = c.Metrics.Cumulative[metrics.Success], c.Metrics.Cumulative[metrics.Coalesced]
	res.BreakerCounted = c.Breaker.Health.Requests
	res.CallsPerRun = float64(res.Calls) / float64(res.Runs)
	for _, v := range perSecond {
		res.PeakRunsPerSecond = max(res.PeakRunsPerSecond, v)
	}
	slices.Sort(latencies)
	res.P50, res.P90, res.P99, res.Max = percentile(latencies, 50), percentile(latencies, 90), percentile(latencies, 99), latencies[len(latencies)-1]
	return res, nil
}

// receive returns the next value from ch, or an error naming what if
// none comes within 10 s.
func receive[T any](ch <-chan T, what string) (T, error) {
	select {
	case v := <-ch:
		return v, nil
	case <-time.After(10 * time.Second):
		var zero T
		return zero, fmt.Errorf("no %s within 10 s", what)
	}
}

// waitCoalescing waits until the group's command has want calls waiting
// for a Run another call started: the call just made has joined its
// flight.
func waitCoalescing(g *command.Group, want int64) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if s := g.Snapshot(); len(s.Commands) > 0 && s.Commands[0].Coalescing == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("coalesce: a call did not join its flight within 10 s")
		}
		runtime.Gosched()
	}
}

// runCoalesce simulates the coalesce scenario and prints the table.
func runCoalesce(p CoalesceParams, w io.Writer) error {
	rs, err := SimulateCoalesce(p)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "cache stampede: %g req/s for %v over %d hot keys; the origin answers each read after %v (LastGood max age %v)\n\n",
		p.Rate, p.Duration, p.Keys, p.Latency, p.MaxAge)
	fmt.Fprintf(w, "%-22s %12s %12s %18s\n", "", rs[0].Mode, rs[1].Mode, rs[2].Mode)
	row := func(name string, f func(r CoalesceResult) any) {
		fmt.Fprintf(w, "%-22s %12v %12v %18v\n", name, f(rs[0]), f(rs[1]), f(rs[2]))
	}
	row("calls", func(r CoalesceResult) any { return r.Calls })
	row("origin reads (Runs)", func(r CoalesceResult) any { return r.Runs })
	row("calls per Run", func(r CoalesceResult) any { return strconv.FormatFloat(r.CallsPerRun, 'f', 1, 64) })
	row("peak Runs in flight", func(r CoalesceResult) any { return r.PeakRuns })
	row("peak Runs per second", func(r CoalesceResult) any { return r.PeakRunsPerSecond })
	row("SUCCESS", func(r CoalesceResult) any { return r.Success })
	row("COALESCED", func(r CoalesceResult) any { return r.Coalesced })
	row("breaker counted", func(r CoalesceResult) any { return r.BreakerCounted })
	row("degraded (stale)", func(r CoalesceResult) any { return r.Degraded })
	row("p50 latency", func(r CoalesceResult) any { return r.P50 })
	row("p90 latency", func(r CoalesceResult) any { return r.P90 })
	row("p99 latency", func(r CoalesceResult) any { return r.P99 })
	row("max latency", func(r CoalesceResult) any { return r.Max })
	_, err = fmt.Fprintln(w)
	return err
}
