// Command traced wires bulwark to OpenTelemetry with bulwarkotel: its
// metrics go to an OpenTelemetry Prometheus exporter served at /metrics,
// its traces (one span per attempt, sampled) to the stdout exporter. A
// handler loop calls a fake inventory service through a retrying group with
// a fallback, under a span of its own; in the middle third of the run the
// service fails every call, so the breakers (the group's and the command's) open, probe and close
// again.
// At the end it scrapes its own /metrics and prints the calls, outcomes and
// breaker transitions it finds there.
//
//	go -C otel run ./examples/traced
//	go -C otel run ./examples/traced -duration 30s -addr 127.0.0.1:9464 -sample 0.01
//
// While it runs, curl http://127.0.0.1:9464/metrics shows every series.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/otel/bulwarkotel"
)

func main() {
	p := params{Addr: "127.0.0.1:9464", Duration: 6 * time.Second, Pace: 5 * time.Millisecond, Sample: 0.002}
	flag.StringVar(&p.Addr, "addr", p.Addr, "address to serve /metrics on")
	flag.DurationVar(&p.Duration, "duration", p.Duration, "how long the handler calls; the service is sick in its middle third")
	flag.DurationVar(&p.Pace, "pace", p.Pace, "pause between two calls")
	flag.Float64Var(&p.Sample, "sample", p.Sample, "share of the handler's traces printed (0 to 1)")
	flag.Parse()
	if err := run(os.Stdout, p); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// params are the program's flags.
type params struct {
	Addr     string
	Duration time.Duration
	Pace     time.Duration
	Sample   float64
}

// inventory is the fake dependency: it fails while sick.
type inventory struct{ sick atomic.Bool }

// stock is a command reading the stock of an item from the inventory.
type stock struct{ inv *inventory }

func (stock) Name() string     { return "stock" }
func (stock) Idempotent() bool { return true }
func (s stock) Run(ctx context.Context) (int, error) {
	select {
	case <-time.After(time.Millisecond):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if s.inv.sick.Load() {
		return 0, errors.New("inventory: unavailable")
	}
	return 42, nil
}
func (stock) Fallback(context.Context, error) (int, error) { return -1, nil } // "unknown": the page says "check later"

// run runs the program, writing spans and the summary to w.
func run(w io.Writer, p params) error {
	ctx := context.Background()
	pr := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(pr))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(ctx)
	spans, err := stdouttrace.New(stdouttrace.WithWriter(w))
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(p.Sample))))
	defer tp.Shutdown(ctx)

	cfg := bulwarkotel.Config{MeterProvider: mp, TracerProvider: tp, AttemptSpans: true}
	hook, err := bulwarkotel.NewHook(cfg)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := command.NewRegistry(command.RegistryConfig{Hook: hook, Logger: logger})
	defer reg.Close(ctx)
	trips := circuit.Config{Window: metrics.Window{Length: time.Second, Buckets: 10}, MinRequests: 10,
		OpenDuration: 200 * time.Millisecond}
	g, err := reg.NewGroup("inventory", command.GroupConfig{Strategy: command.Semaphore, Timeout: 100 * time.Millisecond,
		Retry: retry.Config{MaxAttempts: 2, Backoff: time.Millisecond}, Breaker: trips, CommandBreaker: trips,
		Commands: map[string]command.CommandConfig{"stock": {}}}) // declared: its breaker exists before its first call
	if err != nil {
		return err
	}
	// After the group: NewMetrics watches the breakers that exist, so that
	// every transition is counted, even before the first collection.
	m, err := bulwarkotel.NewMetrics(reg, cfg)
	if err != nil {
		return err
	}
	defer m.Close()

	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(pr, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	inv := &inventory{}
	tracer := tp.Tracer("traced")
	start := time.Now()
	for time.Since(start) < p.Duration {
		el := time.Since(start)
		inv.sick.Store(el > p.Duration/3 && el < 2*p.Duration/3)
		hctx, span := tracer.Start(ctx, "GET /item")
		_, _ = command.Execute(hctx, g, stock{inv: inv})
		span.End()
		time.Sleep(p.Pace)
	}
	return summary(w, "http://"+ln.Addr().String()+"/metrics")
}

// summary scrapes url and prints its calls, outcomes and transitions.
func summary(w io.Writer, url string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	fmt.Fprintln(w, "--- from", url)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, name := range []string{"bulwark_command_calls_total{", "bulwark_command_events_total{", "bulwark_command_circuit_transitions_total{", "bulwark_group_circuit_transitions_total{"} {
			if strings.HasPrefix(line, name) && !strings.HasSuffix(line, " 0") {
				fmt.Fprintln(w, line)
			}
		}
	}
	return sc.Err()
}
