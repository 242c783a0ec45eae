package bulwarkotel_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/otel/bulwarkotel"
)

type getUser struct{}

func (getUser) Run(context.Context) (string, error) { return "ada", nil }

// Report a registry to OpenTelemetry: the hook (set in the registry's
// config, so it must exist first) tells each call to the caller's span
// and records the latency histograms; Metrics reads the registry at each
// collection. An application passes its own providers (an OTLP or
// Prometheus exporter behind them); here a manual reader and an in-memory
// span exporter show what they get.
func Example() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer mp.Shutdown(context.Background())
	defer tp.Shutdown(context.Background())

	cfg := bulwarkotel.Config{MeterProvider: mp, TracerProvider: tp}
	hook, err := bulwarkotel.NewHook(cfg)
	if err != nil {
		panic(err)
	}
	reg := command.NewRegistry(command.RegistryConfig{Hook: hook, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer reg.Close(context.Background())
	m, err := bulwarkotel.NewMetrics(reg, cfg)
	if err != nil {
		panic(err)
	}
	defer m.Close()

	users, err := reg.NewGroup("users", command.GroupConfig{Strategy: command.Semaphore})
	if err != nil {
		panic(err)
	}
	ctx, span := tp.Tracer("app").Start(context.Background(), "GET /profile")
	for range 3 {
		_, _ = command.Execute(ctx, users, getUser{})
	}
	span.End()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	got := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			got[mt.Name] = mt
		}
	}
	calls := got["bulwark.command.calls"]
	fmt.Println(calls.Name, calls.Data.(metricdata.Sum[int64]).DataPoints[0].Value)
	dur := got["bulwark.command.duration"]
	fmt.Println(dur.Name, dur.Unit, dur.Data.(metricdata.Histogram[float64]).DataPoints[0].Count)
	s := spans.GetSpans()[0]
	fmt.Println(s.Name, len(s.Events), s.Events[0].Name)
	// Output:
	// bulwark.command.calls 3
	// bulwark.command.duration s 3
	// GET /profile 3 bulwark.call
}
