// Command dashboard is the Prometheus demo: a service with three simulated
// dependencies behind bulwark commands, under a load it drives itself,
// serving its metrics for Prometheus at /metrics next to bulwark's live
// dashboard at / and the hystrix.stream.
//
//	go -C prom run ./examples/dashboard                 # until Ctrl-C, on 127.0.0.1:7981
//	go -C prom run ./examples/dashboard -addr 127.0.0.1:8080 -duration 5m
//
// prometheus.yml beside this file scrapes it every 5 s and loads the
// example alerts (prom/alerts.yml); from the repository root:
//
//	prometheus --config.file=prom/examples/dashboard/prometheus.yml --storage.tsdb.path="$(mktemp -d)"
//
// then import prom/grafana/bulwark.json into Grafana with that Prometheus as
// its data source.
//
// The dependencies, one group each:
//   - users/GetUser: healthy, 5-25 ms.
//   - inventory/CheckStock: down from second 35 to 55 of every minute: its
//     breaker opens (BulwarkCommandCircuitOpen needs it open over a minute,
//     so it stays quiet here) and a static fallback answers meanwhile.
//   - recommendations/ForUser: 10 % errors, answered with a static
//     fallback, so its degraded share (about 10 %) trips
//     BulwarkCommandDegraded after 5 minutes.
//
// This demo lives in the prom module, not beside examples/dashboard, because
// the library module must not require client_golang and a main package
// cannot be imported to add /metrics to it. It binds only to -addr, loopback
// by default.
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
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/fallback"
	"github.com/bulwark-go/bulwark/dashboard"
	"github.com/bulwark-go/bulwark/prom"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}

// metricsPath is where the demo serves its Prometheus metrics.
const metricsPath = "/metrics"

// run parses args, starts the service and its load, serves the dashboard
// and the metrics, prints the URLs to out, and returns when ctx ends or
// -duration elapses. -h prints the usage to out and returns nil.
func run(ctx context.Context, args []string, out io.Writer) (err error) {
	fs := flag.NewFlagSet("dashboard", flag.ContinueOnError)
	fs.SetOutput(out)
	addr := fs.String("addr", "127.0.0.1:7981", "address to serve the dashboard and /metrics on")
	duration := fs.Duration("duration", 0, "stop after this long (0: until interrupted)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	if *duration < 0 {
		return fmt.Errorf("-duration %v is negative", *duration)
	}
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	logger := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	defer ln.Close()

	reg := command.NewRegistry(command.RegistryConfig{Logger: logger})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = errors.Join(err, reg.Close(ctx))
	}()
	calls, err := newService(reg, time.Now())
	if err != nil {
		return err
	}
	page, err := dashboard.New(reg, dashboard.Config{Logger: logger})
	if err != nil {
		return err
	}
	collector, err := prom.New(reg)
	if err != nil {
		return err
	}
	metrics := prometheus.NewRegistry()
	if err := metrics.Register(collector); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(metricsPath, promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}))
	mux.Handle("/", page)

	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(out, "bulwark dashboard: http://%s/  (metrics: http://%s%s)\n", ln.Addr(), ln.Addr(), metricsPath)

	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(func() { drive(ctx, &wg, c.rate, c.call) })
	}
	<-ctx.Done()

	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	wg.Wait()
	return err
}

// load is one command's share of the load: call, rate times a second.
type load struct {
	rate float64
	call func(ctx context.Context)
}

// newService creates the three groups and returns the load on each.
func newService(reg *command.Registry, start time.Time) ([]load, error) {
	breaker := circuit.Config{OpenDuration: 5 * time.Second, OpenBackoff: 2, OpenMaxDuration: 20 * time.Second}
	groups := map[string]*command.Group{}
	for _, name := range []string{"users", "inventory", "recommendations"} {
		g, err := reg.NewGroup(name, command.GroupConfig{MaxConcurrent: 10, Timeout: 250 * time.Millisecond, CommandBreaker: breaker})
		if err != nil {
			return nil, err
		}
		groups[name] = g
	}
	stock := checkStock{Static: fallback.Static[int]{Value: -1}, start: start}
	recs := forUser{Static: fallback.Static[[]string]{Value: []string{"bestsellers"}}}
	return []load{
		{40, func(ctx context.Context) { _, _ = command.Execute(ctx, groups["users"], getUser{}) }},
		{25, func(ctx context.Context) { _, _ = command.Execute(ctx, groups["inventory"], stock) }},
		{20, func(ctx context.Context) { _, _ = command.Execute(ctx, groups["recommendations"], recs) }},
	}, nil
}

// errUnavailable is what a dependency that is down answers.
var errUnavailable = errors.New("connection refused")

// work waits a random time in [lo, hi) or until ctx ends, like a call that
// honours its context.
func work(ctx context.Context, lo, hi time.Duration) error {
	t := time.NewTimer(lo + rand.N(hi-lo))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// getUser: a healthy dependency.
type getUser struct{}

func (getUser) Name() string { return "GetUser" }
func (getUser) Run(ctx context.Context) (string, error) {
	if err := work(ctx, 5*time.Millisecond, 25*time.Millisecond); err != nil {
		return "", err
	}
	return "ada", nil
}

// checkStock: down from second 35 to 55 of every minute since start.
type checkStock struct {
	fallback.Static[int]
	start time.Time
}

func (checkStock) Name() string { return "CheckStock" }
func (c checkStock) Run(ctx context.Context) (int, error) {
	if err := work(ctx, 10*time.Millisecond, 30*time.Millisecond); err != nil {
		return 0, err
	}
	if sec := time.Since(c.start) % time.Minute; sec >= 35*time.Second && sec < 55*time.Second {
		return 0, errUnavailable
	}
	return 42, nil
}

// forUser: 10 % errors, served by a static fallback.
type forUser struct{ fallback.Static[[]string] }

func (forUser) Name() string { return "ForUser" }
func (forUser) Run(ctx context.Context) ([]string, error) {
	if err := work(ctx, 5*time.Millisecond, 40*time.Millisecond); err != nil {
		return nil, err
	}
	if rand.Float64() < 0.1 {
		return nil, errors.New("recommender: overloaded")
	}
	return []string{"book", "lamp", "tea"}, nil
}

// drive calls call about rate times a second, each call on its own
// goroutine (as concurrent requests would), counted in wg, until ctx ends.
func drive(ctx context.Context, wg *sync.WaitGroup, rate float64, call func(context.Context)) {
	t := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			wg.Go(func() { call(ctx) })
		}
	}
}
