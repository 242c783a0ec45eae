package bulwarkotel

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/bulwark-go/bulwark/command"
)

// empty is a command whose Run does nothing.
type empty struct{}

func (empty) Run(context.Context) (int, error) { return 1, nil }

// BenchmarkExecute is what the hook adds to a call of a semaphore
// command without a timeout, serial: none (no hook, the baseline), noop
// (the hook on OpenTelemetry's no-op providers), sdk (on the SDK's meter
// and tracer providers, no span in the caller's context); then, with a
// caller's span started and ended around each call (the SDK records it,
// a no-op exporter takes it): span (no hook, the baseline of the next
// two), span-event (the hook adds its event to the caller's span) and
// attempt-spans (the hook starts a span per attempt).
//
//	go -C otel test -run '^$' -bench BenchmarkExecute -benchmem ./bulwarkotel/
func BenchmarkExecute(b *testing.B) {
	sdkMeter := func(b *testing.B) *sdkmetric.MeterProvider {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() { require.NoError(b, mp.Shutdown(context.Background())) })
		return mp
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
	b.Cleanup(func() { require.NoError(b, tp.Shutdown(context.Background())) })
	sdkHook := func(b *testing.B, attemptSpans bool) command.CallHook {
		h, err := NewHook(Config{MeterProvider: sdkMeter(b), TracerProvider: tp, AttemptSpans: attemptSpans})
		require.NoError(b, err)
		return h
	}
	for _, bc := range []struct {
		name string
		span bool // a caller's span around each call
		hook func(b *testing.B) command.CallHook
	}{
		{"none", false, func(*testing.B) command.CallHook { return nil }},
		{"noop", false, func(b *testing.B) command.CallHook {
			h, err := NewHook(Config{MeterProvider: noop.NewMeterProvider(), TracerProvider: tracenoop.NewTracerProvider()})
			require.NoError(b, err)
			return h
		}},
		{"sdk", false, func(b *testing.B) command.CallHook { return sdkHook(b, false) }},
		{"span", true, func(*testing.B) command.CallHook { return nil }},
		{"span-event", true, func(b *testing.B) command.CallHook { return sdkHook(b, false) }},
		{"attempt-spans", true, func(b *testing.B) command.CallHook { return sdkHook(b, true) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			reg := command.NewRegistry(command.RegistryConfig{Logger: quiet, Hook: bc.hook(b)})
			b.Cleanup(func() { require.NoError(b, reg.Close(context.Background())) })
			g, err := reg.NewGroup("bench", command.GroupConfig{Strategy: command.Semaphore, Timeout: command.NoTimeout})
			require.NoError(b, err)
			tracer := tp.Tracer("bench")
			b.ReportAllocs()
			for b.Loop() {
				ctx := context.Background()
				var span trace.Span
				if bc.span {
					ctx, span = tracer.Start(ctx, "caller")
				}
				if _, err := command.Execute(ctx, g, empty{}); err != nil {
					b.Fatal(err)
				}
				if bc.span {
					span.End()
				}
			}
		})
	}
}

// BenchmarkCollect is one collection of a registry of 10 groups of 10
// commands each by the SDK's manual reader: off the call path, once per
// export interval.
//
//	go -C otel test -run '^$' -bench BenchmarkCollect -benchmem ./bulwarkotel/
func BenchmarkCollect(b *testing.B) {
	reg := command.NewRegistry(command.RegistryConfig{Logger: quiet})
	b.Cleanup(func() { require.NoError(b, reg.Close(context.Background())) })
	for i := range 10 {
		g, err := reg.NewGroup(fmt.Sprintf("g%d", i), command.GroupConfig{Strategy: command.Semaphore})
		require.NoError(b, err)
		for j := range 10 {
			_, err := command.Execute(context.Background(), g, empty{}, command.WithName(fmt.Sprintf("c%d", j)))
			require.NoError(b, err)
		}
	}
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	b.Cleanup(func() { require.NoError(b, mp.Shutdown(context.Background())) })
	m, err := NewMetrics(reg, Config{MeterProvider: mp})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, m.Close()) })
	var rm metricdata.ResourceMetrics
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Collect(context.Background(), &rm); err != nil {
			b.Fatal(err)
		}
	}
}
