package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/priority"
	"github.com/bulwark-go/bulwark/metrics"
)

// PriorityParams is the priority scenario: one dependency behind a
// semaphore bulkhead of Capacity calls, each taking an exponentially
// distributed time of mean Service, so that it serves Capacity/Service
// calls a second at most; calls arrive as a Poisson stream at Overload
// times that rate, their priority P0..P3 drawn with the weights Mix.
// The run is replayed twice on the virtual clock, with the same draws
// (Seed): with a plain bulkhead, and with priority shedding (Reserve).
type PriorityParams struct {
	Duration time.Duration
	Capacity int
	Service  time.Duration
	Overload float64
	Mix      [4]float64
	Reserve  [4]float64
	Seed     uint64
}

// DefaultPriorityParams is the scenario docs/priority.md reports: a
// bulkhead of 20 calls of 50 ms (400 calls/s), offered 800 calls/s for
// 60 s, 10% P0 to 40% P3, with the reserve {0, 0.1, 0.25, 0.5}.
func DefaultPriorityParams() PriorityParams {
	return PriorityParams{Duration: 60 * time.Second, Capacity: 20, Service: 50 * time.Millisecond, Overload: 2,
		Mix: [4]float64{0.1, 0.2, 0.3, 0.4}, Reserve: [4]float64{0, 0.1, 0.25, 0.5}, Seed: 1}
}

// PriorityRun is what the callers of one priority saw in one run.
type PriorityRun struct {
	Offered, Succeeded, Shed, Rejected int
}

// SuccessPct is the share of the offered calls that succeeded, in percent.
func (r PriorityRun) SuccessPct() float64 {
	if r.Offered == 0 {
		return 0
	}
	return 100 * float64(r.Succeeded) / float64(r.Offered)
}

// SimulatePriority replays p once: with priority shedding when shed is
// set, else with the plain bulkhead. It returns what each priority's
// callers saw.
func SimulatePriority(p PriorityParams, shed bool) ([4]PriorityRun, error) {
	var out [4]PriorityRun
	if p.Capacity < 1 || p.Service <= 0 || p.Overload <= 0 || p.Duration <= 0 {
		return out, fmt.Errorf("%w: priority scenario: Capacity %d, Service %v, Overload %v and Duration %v must be positive",
			errUsage, p.Capacity, p.Service, p.Overload, p.Duration)
	}
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	defer reg.Close(context.Background())
	cfg := command.GroupConfig{Strategy: command.Semaphore, MaxConcurrent: p.Capacity, Timeout: command.NoTimeout}
	if shed {
		cfg.Priority.Reserve = p.Reserve
	}
	g, err := reg.NewGroup("dependency", cfg)
	if err != nil {
		return out, fmt.Errorf("%w: %w", errUsage, err)
	}
	arrivals := rand.New(rand.NewPCG(p.Seed, 0))
	services := rand.New(rand.NewPCG(p.Seed, 1))
	rate := p.Overload * float64(p.Capacity) / p.Service.Seconds() // calls a second
	s := newScheduler(clock, nil)
	var arrive func()
	arrive = func() {
		pr := pick(arrivals, p.Mix)
		service := time.Duration(services.ExpFloat64() * float64(p.Service))
		s.spawn(func(th *thread) {
			cmd := command.Func[struct{}]("call", func(context.Context) (struct{}, error) {
				if !th.sleep(service) {
					return struct{}{}, errStopped
				}
				return struct{}{}, nil
			}, nil)
			_, info, err := command.ExecuteInfo(context.Background(), g, cmd, command.WithPriority(pr))
			if errors.Is(err, errStopped) {
				return // still running when the run ended: not counted
			}
			r := &out[pr]
			r.Offered++
			switch info.Event {
			case metrics.Success:
				r.Succeeded++
			case metrics.PriorityRejected:
				r.Shed++
			case metrics.SemaphoreRejected:
				r.Rejected++
			}
		})
		s.at(clock.Now()+time.Duration(arrivals.ExpFloat64()/rate*float64(time.Second)), arrive)
	}
	s.at(0, arrive)
	s.run(p.Duration)
	return out, nil
}

// formatReserve prints reserves as -reserve takes them: "0,0.1,0.25,0.5".
func formatReserve(r [4]float64) string {
	parts := make([]string, len(r))
	for i, v := range r {
		parts[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

// parseReserve parses -reserve: four shares separated by commas.
func parseReserve(s string) ([4]float64, error) {
	var r [4]float64
	parts := strings.Split(s, ",")
	if len(parts) != len(r) {
		return r, fmt.Errorf("%w: -reserve %q: want %d shares separated by commas, P0 first", errUsage, s, len(r))
	}
	for i, part := range parts {
		v, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil {
			return r, fmt.Errorf("%w: -reserve %q: share %d: %w", errUsage, s, i, err)
		}
		r[i] = v
	}
	return r, nil
}

// pick draws a priority with the weights mix.
func pick(r *rand.Rand, mix [4]float64) priority.Level {
	var total float64
	for _, w := range mix {
		total += w
	}
	x := r.Float64() * total
	for p, w := range mix {
		if x < w {
			return priority.Level(p)
		}
		x -= w
	}
	return priority.P3
}

// runPriority replays p with and without priority shedding and prints a
// table per priority.
func runPriority(p PriorityParams, stdout io.Writer) error {
	plain, err := SimulatePriority(p, false)
	if err != nil {
		return err
	}
	shed, err := SimulatePriority(p, true)
	if err != nil {
		return err
	}
	rate := p.Overload * float64(p.Capacity) / p.Service.Seconds()
	fmt.Fprintf(stdout, "priority shedding: a bulkhead of %d calls of %v on average (%.0f calls/s), offered %.0f calls/s (%.1fx) for %v\n",
		p.Capacity, p.Service, float64(p.Capacity)/p.Service.Seconds(), rate, p.Overload, p.Duration)
	fmt.Fprintf(stdout, "mix %v, reserves %v, seed %d\n\n", p.Mix, p.Reserve, p.Seed)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "priority\toffered\tplain: ok\tplain: rejected\tplain: ok %\tshedding: ok\tshed\trejected\tshedding: ok %\t")
	var tp, ts PriorityRun
	for pr := range priority.P3 + 1 {
		a, b := plain[pr], shed[pr]
		fmt.Fprintf(tw, "%v\t%d\t%d\t%d\t%.1f\t%d\t%d\t%d\t%.1f\t\n", pr, a.Offered, a.Succeeded, a.Rejected, a.SuccessPct(),
			b.Succeeded, b.Shed, b.Rejected, b.SuccessPct())
		tp.Offered, tp.Succeeded, tp.Rejected = tp.Offered+a.Offered, tp.Succeeded+a.Succeeded, tp.Rejected+a.Rejected
		ts.Offered, ts.Succeeded, ts.Shed, ts.Rejected = ts.Offered+b.Offered, ts.Succeeded+b.Succeeded, ts.Shed+b.Shed, ts.Rejected+b.Rejected
	}
	fmt.Fprintf(tw, "all\t%d\t%d\t%d\t%.1f\t%d\t%d\t%d\t%.1f\t\n", tp.Offered, tp.Succeeded, tp.Rejected, tp.SuccessPct(),
		ts.Succeeded, ts.Shed, ts.Rejected, ts.SuccessPct())
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "\ngoodput: plain %.0f calls/s, shedding %.0f calls/s\n",
		float64(tp.Succeeded)/p.Duration.Seconds(), float64(ts.Succeeded)/p.Duration.Seconds())
	return err
}
