// Command fleetview shows the aggregated dashboard of a fleet: it starts
// three demo instances in-process, each a service with its own registry
// and its own hystrix.stream on a loopback port, and serves the stream
// that merges them (dashboard.Aggregate, Turbine-style) with the page.
//
//	go run ./examples/fleetview                     # until Ctrl-C, page on 127.0.0.1:7980
//	go run ./examples/fleetview -instances 5 -duration 2m
//	go run ./examples/fleetview -join http://10.0.0.7:7979/hystrix.stream,http://10.0.0.8:7979/hystrix.stream
//
// With -join it starts no instance and merges the streams given instead.
// The demo instances differ, so the merged view has something to show:
// payments/Charge fails more on the higher instances (its breaker opens on
// the third), and inventory/CheckStock is down on the first instance from
// second 20 to 40 of every minute, so its breaker opens there while the
// others stay closed: the merged tile shows it open (the worst state wins)
// with the traffic of all hosts.
//
// docs/aggregate.png is this program after 40 s (Charge open, CheckStock
// just recovered), made from the repository
// root by
//
//	BULWARK_FLEET_SCREENSHOT=docs/aggregate.png go -C browsertest test -run TestFleetScreenshot -timeout 5m .
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/dashboard"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fleetview:", err)
		os.Exit(1)
	}
}

// run parses args, starts the instances (unless -join) and the aggregate,
// prints the page's URL to out, and returns when ctx ends or -duration
// elapses. -h prints the usage to out and returns nil.
func run(ctx context.Context, args []string, out io.Writer) (err error) {
	fs := flag.NewFlagSet("fleetview", flag.ContinueOnError)
	fs.SetOutput(out)
	addr := fs.String("addr", "127.0.0.1:7980", "address to serve the aggregated dashboard on")
	n := fs.Int("instances", 3, "demo instances to start in-process")
	join := fs.String("join", "", "comma-separated stream URLs to merge instead of demo instances")
	duration := fs.Duration("duration", 0, "stop after this long (0: until interrupted)")
	quiet := fs.Bool("quiet", false, "log warnings only")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	if *duration < 0 {
		return fmt.Errorf("-duration %v is negative", *duration)
	}
	if *join == "" && *n < 1 {
		return fmt.Errorf("-instances %d: need at least one", *n)
	}
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	level := slog.LevelInfo
	if *quiet {
		level = slog.LevelWarn
	}
	logger := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: level}))

	var wg sync.WaitGroup
	var urls []string
	if *join != "" {
		urls = strings.Split(*join, ",")
	} else {
		start := time.Now()
		for i := range *n {
			in, err := startInstance(ctx, &wg, i, start, logger)
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, in.stop()) }()
			urls = append(urls, in.url)
			fmt.Fprintf(out, "instance %d: %s\n", i+1, in.url)
		}
	}

	agg, err := dashboard.NewAggregate(dashboard.AggregateConfig{Instances: urls, Stream: dashboard.Config{Logger: logger}})
	if err != nil {
		return err
	}
	err = serve(ctx, *addr, agg, out, len(urls), func(ctx context.Context) error { return agg.Close(ctx) })
	wg.Wait()
	return err
}

// serve serves h on addr until ctx ends, then closes it with closeH and
// shuts the server down, 5 s at most.
func serve(ctx context.Context, addr string, h http.Handler, out io.Writer, hosts int, closeH func(context.Context) error) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(out, "bulwark fleet view: http://%s/  (stream: http://%s%s, %d instances)\n",
		ln.Addr(), ln.Addr(), dashboard.StreamPath, hosts)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = errors.Join(closeH(sctx), srv.Shutdown(sctx))
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// instance is one demo service: its registry, load and stream server.
type instance struct {
	url  string
	reg  *command.Registry
	srv  *http.Server
	h    *dashboard.Handler
	done chan error
}

// startInstance starts demo instance i (0-based) with its load, which ends
// with ctx and is counted in wg.
func startInstance(ctx context.Context, wg *sync.WaitGroup, i int, start time.Time, logger *slog.Logger) (*instance, error) {
	reg := command.NewRegistry(command.RegistryConfig{Logger: logger.With("instance", i+1)})
	breaker := circuit.Config{OpenDuration: 5 * time.Second}
	users, err := reg.NewGroup("users", command.GroupConfig{MaxConcurrent: 10, Timeout: 200 * time.Millisecond, CommandBreaker: breaker})
	if err != nil {
		return nil, err
	}
	payments, err := reg.NewGroup("payments", command.GroupConfig{MaxConcurrent: 10, Timeout: 500 * time.Millisecond, CommandBreaker: breaker})
	if err != nil {
		return nil, err
	}
	inventory, err := reg.NewGroup("inventory", command.GroupConfig{Strategy: command.Semaphore, MaxConcurrent: 10,
		Timeout: 250 * time.Millisecond, CommandBreaker: breaker})
	if err != nil {
		return nil, err
	}
	h, err := dashboard.New(reg, dashboard.Config{Logger: logger})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	in := &instance{url: "http://" + ln.Addr().String() + dashboard.StreamPath, reg: reg, h: h,
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}, done: make(chan error, 1)}
	go func() { in.done <- in.srv.Serve(ln) }()

	failRatio := 0.1 + 0.25*float64(i) // payments: 10 %, 35 %, 60 %, ...
	getUser := command.Func("GetUser", func(ctx context.Context) (string, error) {
		return "ada", sleep(ctx, between(5*time.Millisecond, 25*time.Millisecond))
	}, nil)
	charge := command.Func("Charge", func(ctx context.Context) (string, error) {
		if err := sleep(ctx, between(20*time.Millisecond, 60*time.Millisecond)); err != nil {
			return "", err
		}
		if rand.Float64() < failRatio {
			return "", errors.New("card processor: declined upstream")
		}
		return "ok", nil
	}, nil)
	stock := command.Func("CheckStock", func(ctx context.Context) (int, error) {
		if err := sleep(ctx, between(5*time.Millisecond, 15*time.Millisecond)); err != nil {
			return 0, err
		}
		sec := time.Since(start) % time.Minute
		if i == 0 && sec >= 20*time.Second && sec < 40*time.Second {
			return 0, errors.New("connection refused")
		}
		return 3, nil
	}, func(context.Context, error) (int, error) { return -1, nil })
	for _, l := range []struct {
		rate float64
		call func(context.Context)
	}{
		{20, func(ctx context.Context) { _, _ = command.Execute(ctx, users, getUser) }},
		{8, func(ctx context.Context) { _, _ = command.Execute(ctx, payments, charge) }},
		{12, func(ctx context.Context) { _, _ = command.Execute(ctx, inventory, stock) }},
	} {
		wg.Go(func() { generateLoad(ctx, wg, l.rate, l.call) })
	}
	return in, nil
}

// stop ends the instance's stream and server and closes its registry; the
// load has stopped with the context.
func (in *instance) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := errors.Join(in.h.Close(ctx), in.srv.Shutdown(ctx))
	if serr := <-in.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return errors.Join(err, in.reg.Close(ctx))
}

// sleep waits d or until ctx ends, like a call that honours its context.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// between returns a random duration in [lo, hi).
func between(lo, hi time.Duration) time.Duration {
	return lo + rand.N(hi-lo)
}

// generateLoad calls call about rate times a second, each call on its own
// goroutine, at most 32 at once.
func generateLoad(ctx context.Context, wg *sync.WaitGroup, rate float64, call func(context.Context)) {
	inFlight := make(chan struct{}, 32)
	t := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		select {
		case inFlight <- struct{}{}:
		default:
			continue
		}
		wg.Go(func() {
			defer func() { <-inFlight }()
			call(ctx)
		})
	}
}
