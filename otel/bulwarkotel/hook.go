package bulwarkotel

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// Hook is a command.CallHook (set it as command.RegistryConfig.Hook) that
// reports every call to OpenTelemetry: its outcome to the caller's span
// (or, with Config.AttemptSpans, to one span per attempt) and its latency
// to two histograms. The package doc says what each carries. It is safe
// for concurrent use.
type Hook struct {
	tracer       trace.Tracer
	attemptSpans bool
	duration     metric.Float64Histogram // a call's latency, as its caller saw it
	run          metric.Float64Histogram // an attempt's Run
	sets         sync.Map                // seriesKey → []metric.RecordOption: a histogram series' attributes, built once
}

// seriesKey names a histogram series: a command and a primary outcome.
type seriesKey struct {
	group, command string
	event          metrics.Event
}

// buckets are the histograms' bucket bounds in seconds, from 1 ms to 10 s
// (OpenTelemetry's HTTP duration advice with 1 ms and 2.5 ms for fast
// dependencies, the same as module prom's).
var buckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// NewHook returns a hook reporting to cfg's providers. The error is the
// meter's, creating the histograms.
func NewHook(cfg Config) (*Hook, error) {
	meter := cfg.meter()
	h := &Hook{tracer: cfg.tracer(), attemptSpans: cfg.AttemptSpans}
	var err error
	if h.duration, err = meter.Float64Histogram("bulwark.command.duration", metric.WithUnit("s"),
		metric.WithDescription("Latency of the command's calls as their callers saw them: every attempt, backoff and fallback included."),
		metric.WithExplicitBucketBoundaries(buckets...)); err != nil {
		return nil, err
	}
	if h.run, err = meter.Float64Histogram("bulwark.command.run.duration", metric.WithUnit("s"),
		metric.WithDescription("Latency of the command's Run, per attempt whose Run returned before its caller was answered."),
		metric.WithExplicitBucketBoundaries(buckets...)); err != nil {
		return nil, err
	}
	return h, nil
}

// attemptMark is the value a call's attempt span leaves in the call's
// context: the caller's context, the parent of every attempt's span.
type attemptMark struct{}

// Begin is the command.CallHook method: with Config.AttemptSpans, it
// starts the attempt's span, a child of the caller's span, and returns
// the context that carries it; else it returns ctx.
func (h *Hook) Begin(ctx context.Context, g *command.Group, in command.Info) context.Context {
	if !h.attemptSpans {
		return ctx
	}
	parent := ctx
	if in.Attempts > 1 { // ctx carries the previous attempt's span: take its parent
		if p, ok := ctx.Value(attemptMark{}).(context.Context); ok {
			parent = p
		}
	}
	_, span := h.tracer.Start(parent, "bulwark "+g.Name()+"/"+in.Command, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(KeyGroup.String(g.Name()), KeyCommand.String(in.Command), KeyAttempt.Int(in.Attempts)))
	ctx = trace.ContextWithSpan(ctx, span)
	if in.Attempts == 1 {
		ctx = context.WithValue(ctx, attemptMark{}, parent)
	}
	return ctx
}

// End is the command.CallHook method: it records the latencies in the
// histograms and tells the attempt's outcome to the span: with
// Config.AttemptSpans the attempt's own, which it ends; else, if the
// caller's span records, as an event on it.
func (h *Hook) End(ctx context.Context, g *command.Group, in command.Info) {
	retried := in.Events.Has(metrics.Retried)
	if in.RunLatency > 0 {
		h.run.Record(ctx, in.RunLatency.Seconds(), h.series(g, in)...)
	}
	if !retried {
		h.duration.Record(ctx, in.Latency.Seconds(), h.series(g, in)...)
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		if h.attemptSpans {
			span.End()
		}
		return
	}
	attrs := outcome(g, in, retried)
	failed := retried || in.Events.Has(metrics.ExceptionThrown)
	if !h.attemptSpans {
		name := "bulwark.call"
		if retried {
			name = "bulwark.attempt"
		}
		span.AddEvent(name, trace.WithAttributes(attrs...))
		return
	}
	span.SetAttributes(attrs...)
	if failed {
		span.SetStatus(codes.Error, in.Event.String())
	}
	span.End()
}

// outcome returns the attributes that tell how the attempt (or the call,
// when it is not retried) in of group g went.
func outcome(g *command.Group, in command.Info, retried bool) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs, KeyGroup.String(g.Name()), KeyCommand.String(in.Command),
		KeyEvent.String(in.Event.Label()), KeyAttempt.Int(in.Attempts))
	if retried {
		attrs = append(attrs, KeyRetried.Bool(true))
	} else {
		attrs = append(attrs, KeyDegraded.Bool(in.Degraded))
		for _, e := range fallbackEvents {
			if in.Events.Has(e) {
				attrs = append(attrs, KeyFallback.String(e.Label()))
			}
		}
		if in.Events.Has(metrics.DegradedDeferred) {
			attrs = append(attrs, KeyDeferred.Bool(true))
		}
	}
	if in.Events.Has(metrics.Probe) {
		attrs = append(attrs, KeyProbe.Bool(true))
	}
	if b, ok := g.CommandBreaker(in.Command); ok {
		attrs = append(attrs, KeyState.String(b.State().String()))
	}
	return append(attrs, KeyGroupState.String(g.Breaker().State().String()))
}

// series returns the record options of the histogram series of in, an
// attempt in group g: its group, command and primary outcome, built once
// per series.
func (h *Hook) series(g *command.Group, in command.Info) []metric.RecordOption {
	k := seriesKey{g.Name(), in.Command, in.Event}
	if v, ok := h.sets.Load(k); ok {
		return v.([]metric.RecordOption)
	}
	opts := []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(
		KeyGroup.String(g.Name()), KeyCommand.String(in.Command), KeyEvent.String(in.Event.Label())))}
	v, _ := h.sets.LoadOrStore(k, opts)
	return v.([]metric.RecordOption)
}

var _ command.CallHook = (*Hook)(nil)
