package bulwarkotel

import (
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the meters and the tracer
// this package creates: the module's path.
const ScopeName = "github.com/bulwark-go/bulwark/otel"

// ErrNilRegistry is the error of NewMetrics given no registry.
var ErrNilRegistry = errors.New("bulwarkotel: nil registry")

// Config says where NewMetrics and NewHook report. Its zero value reports
// to the global providers (otel.GetMeterProvider, otel.GetTracerProvider),
// as OpenTelemetry's instrumentation libraries do, and adds no span.
type Config struct {
	// MeterProvider gets the metrics (NewMetrics) and the latency
	// histograms (NewHook). Default: otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// TracerProvider gets the hook's spans. Default: otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// AttemptSpans makes the hook start one span per attempt (a child of
	// the caller's span, or a root span when the caller has none), which
	// Run's context carries, so that the dependency's own spans nest under
	// the attempt that made them. Default false: no new span; what the
	// hook tells goes to the caller's span, if it records.
	AttemptSpans bool
}

func (c Config) meter() metric.Meter {
	mp := c.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	return mp.Meter(ScopeName)
}

func (c Config) tracer() trace.Tracer {
	tp := c.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(ScopeName)
}
