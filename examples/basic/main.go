// Command basic shows one command against a flaky dependency: a stock
// lookup with Run and Fallback, in a group with a 50 ms timeout and
// breakers that trip at 50 % failures over at least 8 calls. It prints what happened
// to every call (outcome, fallback, degraded value), a summary with the
// breaker's transitions, and finally every go-metrics gauge and counter the
// registry published, as JSON. It takes about two seconds.
//
//	go run ./examples/basic
//
// The fake inventory service answers in a few milliseconds. For its first
// 0.4 s it is flaky (every 6th call fails, every 9th is too slow: 80 ms),
// then down until 1.0 s, then healthy.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	gometrics "github.com/rcrowley/go-metrics"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/fallback"
	"github.com/bulwark-go/bulwark/gmbridge"
	"github.com/bulwark-go/bulwark/metrics"
)

func main() {
	if err := run(os.Stdout, defaultParams()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// params sets the pace of the demo.
type params struct {
	Calls      int           // calls made, one after the other
	Pace       time.Duration // pause between calls
	OutageFrom time.Duration // the dependency is down from OutageFrom to OutageTo after the start
	OutageTo   time.Duration
}

func defaultParams() params {
	return params{Calls: 60, Pace: 25 * time.Millisecond, OutageFrom: 400 * time.Millisecond, OutageTo: time.Second}
}

// inventory is the flaky dependency.
type inventory struct {
	start      time.Time
	from, to   time.Duration
	calls      atomic.Int64
	errOutage  error
	errConnRst error
}

func newInventory(p params) *inventory {
	return &inventory{start: time.Now(), from: p.OutageFrom, to: p.OutageTo,
		errOutage: errors.New("inventory: 503 service unavailable"), errConnRst: errors.New("inventory: connection reset")}
}

// Stock returns the stock of sku, or fails as the package doc says.
func (s *inventory) Stock(ctx context.Context, sku string) (int, error) {
	n := s.calls.Add(1)
	since := time.Since(s.start)
	delay := 3 * time.Millisecond
	switch {
	case since >= s.to: // recovered
	case since >= s.from:
		return 0, s.errOutage
	case n%9 == 0:
		delay = 80 * time.Millisecond
	case n%6 == 0:
		return 0, s.errConnRst
	}
	select {
	case <-time.After(delay):
		return 40 + int(n%10), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// checkStock is the command. Run asks the inventory and remembers the
// answer; Fallback serves the last answer if it is at most 2 s old.
type checkStock struct {
	inv  *inventory
	sku  string
	last *fallback.LastGood[int]
}

func (c checkStock) Run(ctx context.Context) (int, error) {
	n, err := c.inv.Stock(ctx, c.sku)
	if err == nil {
		c.last.Store(n)
	}
	return n, err
}

func (c checkStock) Fallback(ctx context.Context, err error) (int, error) {
	return c.last.Fallback(ctx, err)
}

func run(w io.Writer, p params) error {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	gm := gometrics.NewRegistry()
	reg := command.NewRegistry(command.RegistryConfig{Logger: quiet, Exporter: gmbridge.New(gm)})
	defer reg.Close(context.Background())
	// Both breakers, the group's and the command's, judge the last second:
	// at least 8 calls, half of them failed or timed out: open for 250 ms.
	breaker := circuit.Config{
		Window:       metrics.Window{Length: time.Second, Buckets: 10},
		MinRequests:  8,
		FailureRatio: 0.5,
		OpenDuration: 250 * time.Millisecond,
	}
	group, err := reg.NewGroup("inventory", command.GroupConfig{
		Timeout:        50 * time.Millisecond,
		Window:         metrics.Window{Length: time.Second, Buckets: 10},
		Breaker:        breaker,
		CommandBreaker: breaker,
	})
	if err != nil {
		return err
	}
	last, err := fallback.NewLastGood[int](2*time.Second, nil)
	if err != nil {
		return err
	}
	inv := newInventory(p)
	cmd := checkStock{inv: inv, sku: "lamp-042", last: last}

	fmt.Fprintf(w, "%-8s %-4s %-16s %-20s %s\n", "time", "call", "outcome", "fallback", "result")
	for i := 1; i <= p.Calls; i++ {
		stock, info, err := command.ExecuteInfo(context.Background(), group, cmd)
		fallback := "-"
		for _, e := range []metrics.Event{metrics.FallbackSuccess, metrics.FallbackFailure,
			metrics.FallbackRejection, metrics.FallbackMissing} {
			if info.Events.Has(e) {
				fallback = e.String()
			}
		}
		result := fmt.Sprintf("stock=%d", stock)
		switch {
		case err != nil:
			result = "error: " + err.Error()
		case info.Degraded:
			result += " (degraded)"
		}
		fmt.Fprintf(w, "%-8s %-4d %-16s %-20s %s\n", time.Since(inv.start).Round(time.Millisecond), i, info.Event, fallback, result)
		time.Sleep(p.Pace)
	}

	for _, g := range reg.Snapshot().Groups {
		for _, c := range g.Commands {
			fmt.Fprintf(w, "\nsummary of %s/%s: %d calls reached the inventory\n", g.Name, c.Name, inv.calls.Load())
			for e := range metrics.NumEvents {
				if n := c.Metrics.Cumulative[e]; n > 0 {
					fmt.Fprintf(w, "  %-18s %d\n", e, n)
				}
			}
			fmt.Fprintf(w, "  degraded rate over the last second: %.0f%%\n", 100*c.Metrics.Counts.DegradedRate())
			printBreaker(w, "command breaker", c.Breaker)
		}
		printBreaker(w, "group breaker", g.Breaker)
	}
	fmt.Fprintln(w, "\ngo-metrics (WriteJSONOnce):")
	gometrics.WriteJSONOnce(gm, w)
	fmt.Fprintln(w)
	return nil
}

func printBreaker(w io.Writer, title string, b circuit.Snapshot) {
	fmt.Fprintf(w, "  %s %s: %s\n", title, b.Config.Name, b.State)
	for _, t := range b.Transitions {
		fmt.Fprintf(w, "    %-9v -> %-9v %-17s window: %d calls, %d failures, %d timeouts\n",
			t.From, t.To, t.Reason, t.Health.Requests, t.Health.Failures, t.Health.Timeouts)
	}
}
