package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/adaptive"
	"github.com/bulwark-go/bulwark/metrics"
)

// AdaptivePhase is one stretch of the adaptive scenario: until Until, calls
// arrive at Load times the dependency's base capacity (Workers/Service
// calls a second at the start), and the dependency has Workers workers.
type AdaptivePhase struct {
	Until   time.Duration
	Load    float64
	Workers int
}

// AdaptiveParams is the adaptive scenario: a dependency with a FIFO queue
// in front of Workers workers (its capacity), each call taking a time
// drawn uniformly in [Service/2, 3·Service/2], so that its latency grows
// with the calls it holds once they are more than its workers. Calls
// arrive as a Poisson stream whose rate and the workers change by Phases.
// The caller's semaphore bulkhead is replayed with the same draws (Seed)
// at each static limit of Statics, at the too-large static limit TooLarge,
// and with the adaptive limit Adaptive.
type AdaptiveParams struct {
	Service  time.Duration
	Phases   []AdaptivePhase
	Statics  []int
	TooLarge int
	Adaptive adaptive.Config
	Band     float64 // "near capacity": within Band × the workers
	Seed     uint64
}

// DefaultAdaptiveParams is the scenario docs/adaptive-limit.md reports: 60
// workers of 25 ms (2,400 calls/s); half that load for 20 s, then twice
// it for 60 s, during which the workers drop to 30 for 20 s (a capacity
// change) and come back, then half the load again; static limits from 30 to
// 120, a too-large one of 600, and an adaptive limit in [1, 600].
func DefaultAdaptiveParams() AdaptiveParams {
	return AdaptiveParams{
		Service: 25 * time.Millisecond,
		Phases: []AdaptivePhase{
			{Until: 20 * time.Second, Load: 0.5, Workers: 60},
			{Until: 40 * time.Second, Load: 2, Workers: 60},
			{Until: 60 * time.Second, Load: 2, Workers: 30},
			{Until: 80 * time.Second, Load: 2, Workers: 60},
			{Until: 100 * time.Second, Load: 0.5, Workers: 60},
		},
		Statics:  []int{30, 45, 60, 75, 90, 120},
		TooLarge: 600,
		Adaptive: adaptive.Config{Max: 600},
		Band:     0.25,
		Seed:     1,
	}
}

// duration is the scenario's length: the last phase's end.
func (p AdaptiveParams) duration() time.Duration { return p.Phases[len(p.Phases)-1].Until }

// phaseAt returns the phase in force at t.
func (p AdaptiveParams) phaseAt(t time.Duration) AdaptivePhase {
	for _, ph := range p.Phases {
		if t < ph.Until {
			return ph
		}
	}
	return p.Phases[len(p.Phases)-1]
}

// adaptiveSlice is the length of the rows of the scenario's table.
const adaptiveSlice = 5 * time.Second

// AdaptiveRun is what the callers saw in one run: per slice of
// adaptiveSlice, the calls that succeeded, their p99 latency and the
// bulkhead's limit at the slice's end; and over the whole run.
type AdaptiveRun struct {
	Limit     int             // the static limit; 0: adaptive
	Config    adaptive.Config // the adaptive limit's, defaults applied
	Succeeded []int
	P99       []time.Duration
	Limits    []int // at each slice's end
	Trace     []int // the limit every 100 ms
	Total     int
	TotalP99  time.Duration
	Rejected  int
}

// Goodput is the run's successful calls a second.
func (r AdaptiveRun) Goodput(p AdaptiveParams) float64 {
	return float64(r.Total) / p.duration().Seconds()
}

// dependency is the queueing model: workers serving a FIFO queue.
type dependency struct {
	s       *scheduler
	workers int
	busy    int
	queue   []waiting
	head    int
}

// waiting is a call queued at the dependency: its thread and service time.
type waiting struct {
	th      *thread
	service time.Duration
}

// enter starts th's call, of service time service, or queues it; the
// thread then parks until the call is done.
func (d *dependency) enter(th *thread, service time.Duration) {
	if d.busy < d.workers {
		d.start(waiting{th, service})
		return
	}
	d.queue = append(d.queue, waiting{th, service})
}

// start serves w: a worker is busy until its service time is over, then
// takes the next queued call and resumes w's thread.
func (d *dependency) start(w waiting) {
	d.busy++
	d.s.at(d.s.now()+w.service, func() {
		d.busy--
		d.fill()
		d.s.resume(w.th)
	})
}

// fill starts queued calls while a worker is free.
func (d *dependency) fill() {
	for d.busy < d.workers && d.head < len(d.queue) {
		w := d.queue[d.head]
		d.queue[d.head] = waiting{}
		d.head++
		d.start(w)
	}
	if d.head == len(d.queue) {
		d.queue, d.head = d.queue[:0], 0
	}
}

// SimulateAdaptive replays p once with a static limit of limit calls, or
// with the adaptive limit when limit is 0.
func SimulateAdaptive(p AdaptiveParams, limit int) (AdaptiveRun, error) {
	out := AdaptiveRun{Limit: limit}
	if p.Service <= 0 || len(p.Phases) == 0 || limit < 0 {
		return out, fmt.Errorf("%w: adaptive scenario: Service %v must be positive, Phases %d at least 1, limit %d not negative",
			errUsage, p.Service, len(p.Phases), limit)
	}
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	defer reg.Close(context.Background())
	cfg := command.GroupConfig{Strategy: command.Semaphore, MaxConcurrent: limit, Timeout: command.NoTimeout}
	if limit == 0 {
		cfg.Adaptive = p.Adaptive
	}
	g, err := reg.NewGroup("dependency", cfg)
	if err != nil {
		return out, fmt.Errorf("%w: %w", errUsage, err)
	}
	out.Config = g.Config().Adaptive
	arrivals := rand.New(rand.NewPCG(p.Seed, 0))
	services := rand.New(rand.NewPCG(p.Seed, 1))
	s := newScheduler(clock, nil)
	d := &dependency{s: s, workers: p.Phases[0].Workers}
	base := float64(p.Phases[0].Workers) / p.Service.Seconds() // calls a second
	n := int((p.duration() + adaptiveSlice - 1) / adaptiveSlice)
	lat := make([][]time.Duration, n)
	var all []time.Duration
	var arrive func()
	arrive = func() {
		now := clock.Now()
		ph := p.phaseAt(now)
		if d.workers != ph.Workers {
			d.workers = ph.Workers
			d.fill()
		}
		service := p.Service/2 + time.Duration(services.Float64()*float64(p.Service))
		s.spawn(func(th *thread) {
			cmd := command.Func[struct{}]("call", func(context.Context) (struct{}, error) {
				d.enter(th, service)
				if !th.park() {
					return struct{}{}, errStopped
				}
				return struct{}{}, nil
			}, nil)
			_, info, err := command.ExecuteInfo(context.Background(), g, cmd)
			switch {
			case errors.Is(err, errStopped):
				// still running when the run ended: not counted
			case info.Event == metrics.Success:
				i := int(now / adaptiveSlice)
				out.Succeeded[i]++
				lat[i] = append(lat[i], info.Latency)
				all = append(all, info.Latency)
			case info.Event == metrics.SemaphoreRejected:
				out.Rejected++
			}
		})
		s.at(now+time.Duration(arrivals.ExpFloat64()/(ph.Load*base)*float64(time.Second)), arrive)
	}
	out.Succeeded = make([]int, n)
	var trace func()
	trace = func() {
		out.Trace = append(out.Trace, g.Snapshot().Bulkhead.Capacity)
		s.at(clock.Now()+100*time.Millisecond, trace)
	}
	s.at(0, trace)
	s.at(0, arrive)
	s.run(p.duration())
	for i := range lat {
		out.P99 = append(out.P99, p99(lat[i]))
		out.Limits = append(out.Limits, out.Trace[min(len(out.Trace)-1, (i+1)*int(adaptiveSlice/(100*time.Millisecond))-1)])
		out.Total += out.Succeeded[i]
	}
	out.TotalP99 = p99(all)
	return out, nil
}

// p99 returns the 99th percentile of ds (sorted in place); 0 for none.
func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return percentile(ds, 99)
}

// Settle returns, for each change of the workers in p while the load is
// above the capacity and for each step of the load up to above it, how
// long the run's limit took to come within p.Band of the workers and stay
// there until the phase ended; -1 when it never did.
func (r AdaptiveRun) Settle(p AdaptiveParams) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(p.Phases); i++ {
		prev, ph := p.Phases[i-1], p.Phases[i]
		base := float64(p.Phases[0].Workers)
		overloaded := ph.Load*base > float64(ph.Workers)
		if !overloaded || (ph.Workers == prev.Workers && prev.Load*base > float64(prev.Workers)) {
			continue
		}
		from, to := int(prev.Until/(100*time.Millisecond)), int(ph.Until/(100*time.Millisecond))
		settled := time.Duration(-1)
		for j := to - 1; j >= from && j < len(r.Trace); j-- {
			if d := float64(r.Trace[j]) - float64(ph.Workers); d < -p.Band*float64(ph.Workers) || d > p.Band*float64(ph.Workers) {
				break
			}
			settled = time.Duration(j-from) * 100 * time.Millisecond
		}
		out = append(out, settled)
	}
	return out
}

// runAdaptive replays p with every static limit, the too-large one and the
// adaptive limit, and prints the table and the figures against the targets.
func runAdaptive(p AdaptiveParams, stdout io.Writer) error {
	ad, err := SimulateAdaptive(p, 0)
	if err != nil {
		return err
	}
	var best AdaptiveRun
	for _, l := range p.Statics {
		r, err := SimulateAdaptive(p, l)
		if err != nil {
			return err
		}
		if r.Total > best.Total {
			best = r
		}
	}
	big, err := SimulateAdaptive(p, p.TooLarge)
	if err != nil {
		return err
	}
	base := float64(p.Phases[0].Workers) / p.Service.Seconds()
	fmt.Fprintf(stdout, "adaptive limit: a dependency of %d workers x %v (%.0f calls/s) behind a FIFO queue; static limits %v, too large %d, seed %d\n",
		p.Phases[0].Workers, p.Service, base, p.Statics, p.TooLarge, p.Seed)
	c := ad.Config
	fmt.Fprintf(stdout, "adaptive: Min %d, Max %d, Initial %d, Tolerance %v, Smoothing %v, Window %v\n\n", c.Min, c.Max, c.Initial, c.Tolerance, c.Smoothing, c.Window)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "until\tload\tworkers\tadaptive: limit\tok/s\tp99 ms\tstatic %d: ok/s\tp99 ms\tstatic %d: ok/s\tp99 ms\t\n", best.Limit, big.Limit)
	for i := range ad.Succeeded {
		end := time.Duration(i+1) * adaptiveSlice
		ph := p.phaseAt(end - 1)
		sec := adaptiveSlice.Seconds()
		fmt.Fprintf(tw, "%v\t%.1fx\t%d\t%d\t%.0f\t%.1f\t%.0f\t%.1f\t%.0f\t%.1f\t\n", end, ph.Load, ph.Workers, ad.Limits[i],
			float64(ad.Succeeded[i])/sec, ms(ad.P99[i]), float64(best.Succeeded[i])/sec, ms(best.P99[i]),
			float64(big.Succeeded[i])/sec, ms(big.P99[i]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwhole run: adaptive %.0f ok/s p99 %.1f ms; best static (%d) %.0f ok/s p99 %.1f ms; too large (%d) %.0f ok/s p99 %.1f ms\n",
		ad.Goodput(p), ms(ad.TotalP99), best.Limit, best.Goodput(p), ms(best.TotalP99), big.Limit, big.Goodput(p), ms(big.TotalP99))
	fmt.Fprintf(stdout, "target goodput within 10%% of the best static: %.1f%% of it\n", 100*ad.Goodput(p)/best.Goodput(p))
	fmt.Fprintf(stdout, "target p99 at least 3x lower than too large: %.1fx lower\n", float64(big.TotalP99)/float64(ad.TotalP99))
	fmt.Fprintf(stdout, "target limit within %.0f%% of the workers within 10s of a change (and staying there):", 100*p.Band)
	for _, d := range ad.Settle(p) {
		if d < 0 {
			fmt.Fprint(stdout, " never")
		} else {
			fmt.Fprintf(stdout, " %v", d)
		}
	}
	_, err = fmt.Fprintln(stdout)
	return err
}
