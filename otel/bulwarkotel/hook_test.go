package bulwarkotel

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/metrics"
)

// newTracing returns an in-memory span exporter and a tracer provider
// exporting each span to it as it ends, shut down at the test's end.
func newTracing(t *testing.T) (*tracetest.InMemoryExporter, *sdktrace.TracerProvider) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	return exp, tp
}

// flaky is an idempotent test command: its Run fails its first fails
// calls (counted in runs), advancing the clock by took each time, and
// starts a span "db" from its context when tracer is set; its fallback
// serves 0.
type flaky struct {
	name   string
	fails  int64
	runs   *atomic.Int64
	took   time.Duration
	clock  *metrics.ManualClock
	tracer trace.Tracer
}

func (f flaky) Name() string     { return f.name }
func (f flaky) Idempotent() bool { return true }
func (f flaky) Run(ctx context.Context) (int, error) {
	if f.tracer != nil {
		_, span := f.tracer.Start(ctx, "db")
		defer span.End()
	}
	f.clock.Advance(f.took)
	if f.runs.Add(1) <= f.fails {
		return 0, errors.New("down")
	}
	return 1, nil
}
func (f flaky) Fallback(context.Context, error) (int, error) { return 0, nil }

// retrying returns a group "deps" of reg that makes up to 3 attempts,
// without a budget, sleeping by moving clock.
func retrying(t *testing.T, reg *command.Registry, clock *metrics.ManualClock) *command.Group {
	t.Helper()
	g, err := reg.NewGroup("deps", command.GroupConfig{Strategy: command.Semaphore, Timeout: command.NoTimeout,
		Retry: retry.Config{MaxAttempts: 3, NoBudget: true, Sleep: func(ctx context.Context, d time.Duration) error {
			clock.Advance(d)
			return ctx.Err()
		}}})
	require.NoError(t, err)
	return g
}

// attrMap returns kvs as a map from key to value.
func attrMap(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestHookTellsTheCallersSpan(t *testing.T) {
	exp, tp := newTracing(t)
	_, mp := newReader(t)
	h, err := NewHook(Config{TracerProvider: tp, MeterProvider: mp})
	require.NoError(t, err)
	reg, clock := newRegistry(t, h)
	g := retrying(t, reg, clock)

	ctx, span := tp.Tracer("test").Start(context.Background(), "handler")
	var runs atomic.Int64
	v, info, err := command.ExecuteInfo(ctx, g, flaky{name: "get", fails: 3, runs: &runs, clock: clock})
	span.End()
	require.NoError(t, err)
	require.True(t, info.Degraded)
	assert.Equal(t, 0, v)

	spans := exp.GetSpans()
	require.Len(t, spans, 1, "no span of its own: only the caller's")
	evs := spans[0].Events
	require.Len(t, evs, 3, "one event per attempt")
	for i, ev := range evs[:2] {
		assert.Equal(t, "bulwark.attempt", ev.Name)
		a := attrMap(ev.Attributes)
		assert.Equal(t, "failure", a[KeyEvent].AsString())
		assert.EqualValues(t, i+1, a[KeyAttempt].AsInt64())
		assert.True(t, a[KeyRetried].AsBool())
	}
	assert.Equal(t, "bulwark.call", evs[2].Name)
	a := attrMap(evs[2].Attributes)
	assert.Equal(t, "deps", a[KeyGroup].AsString())
	assert.Equal(t, "get", a[KeyCommand].AsString())
	assert.Equal(t, "failure", a[KeyEvent].AsString())
	assert.EqualValues(t, 3, a[KeyAttempt].AsInt64())
	assert.True(t, a[KeyDegraded].AsBool())
	assert.Equal(t, "fallback_success", a[KeyFallback].AsString())
	assert.Equal(t, "closed", a[KeyState].AsString())
	assert.Equal(t, "closed", a[KeyGroupState].AsString())
	assert.Equal(t, codes.Unset, spans[0].Status.Code, "the caller's span's status is the caller's")
}

func TestHookWithoutARecordingSpan(t *testing.T) {
	exp, tp := newTracing(t)
	r, mp := newReader(t)
	h, err := NewHook(Config{TracerProvider: tp, MeterProvider: mp})
	require.NoError(t, err)
	reg, clock := newRegistry(t, h)
	g := retrying(t, reg, clock)
	var runs atomic.Int64
	_, err = command.Execute(context.Background(), g, flaky{name: "get", runs: &runs, clock: clock, took: 3 * time.Millisecond})
	require.NoError(t, err)
	assert.Empty(t, exp.GetSpans())
	p, ok := collect(t, r).histogram(t, "bulwark.command.duration", "bulwark.group", "deps", "bulwark.command", "get", "bulwark.event", "success")
	require.True(t, ok, "the histograms do not need a span")
	assert.EqualValues(t, 1, p.Count)
}

func TestHookAttemptSpans(t *testing.T) {
	exp, tp := newTracing(t)
	_, mp := newReader(t)
	h, err := NewHook(Config{TracerProvider: tp, MeterProvider: mp, AttemptSpans: true})
	require.NoError(t, err)
	reg, clock := newRegistry(t, h)
	g := retrying(t, reg, clock)

	ctx, span := tp.Tracer("test").Start(context.Background(), "handler")
	var runs atomic.Int64
	v, err := command.Execute(ctx, g, flaky{name: "get", fails: 2, runs: &runs, clock: clock, tracer: tp.Tracer("test")})
	span.End()
	require.NoError(t, err)
	assert.Equal(t, 1, v)

	byName := map[string][]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		byName[s.Name] = append(byName[s.Name], s)
	}
	require.Len(t, byName["handler"], 1)
	handler := byName["handler"][0].SpanContext
	attempts, dbs := byName["bulwark deps/get"], byName["db"]
	require.Len(t, attempts, 3, "one span per attempt")
	require.Len(t, dbs, 3)
	for i, s := range attempts {
		assert.Equal(t, handler.SpanID(), s.Parent.SpanID(), "attempt %d is a child of the caller's span, not of the attempt before", i+1)
		assert.Equal(t, handler.TraceID(), s.SpanContext.TraceID())
		assert.Equal(t, trace.SpanKindInternal, s.SpanKind)
		a := attrMap(s.Attributes)
		assert.EqualValues(t, i+1, a[KeyAttempt].AsInt64())
		assert.Equal(t, s.SpanContext.SpanID(), dbs[i].Parent.SpanID(), "Run's spans nest under their attempt's")
		if i < 2 {
			assert.Equal(t, "failure", a[KeyEvent].AsString())
			assert.True(t, a[KeyRetried].AsBool())
			assert.Equal(t, codes.Error, s.Status.Code)
			assert.Equal(t, "FAILURE", s.Status.Description)
		} else {
			assert.Equal(t, "success", a[KeyEvent].AsString())
			assert.False(t, a[KeyDegraded].AsBool())
			assert.Equal(t, codes.Unset, s.Status.Code)
		}
	}
	assert.Empty(t, byName["handler"][0].Events, "the attempt spans tell it all")
}

// outer is a command whose Run executes inner in group g.
type outer struct {
	g     *command.Group
	inner flaky
}

func (o outer) Name() string { return "outer" }
func (o outer) Run(ctx context.Context) (int, error) {
	return command.Execute(ctx, o.g, o.inner)
}

func TestHookAttemptSpansNest(t *testing.T) {
	exp, tp := newTracing(t)
	_, mp := newReader(t)
	h, err := NewHook(Config{TracerProvider: tp, MeterProvider: mp, AttemptSpans: true})
	require.NoError(t, err)
	reg, clock := newRegistry(t, h)
	g := retrying(t, reg, clock)
	var runs atomic.Int64
	_, err = command.Execute(context.Background(), g, outer{g: g, inner: flaky{name: "inner", fails: 1, runs: &runs, clock: clock}})
	require.NoError(t, err)

	byName := map[string][]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		byName[s.Name] = append(byName[s.Name], s)
	}
	require.Len(t, byName["bulwark deps/outer"], 1)
	out := byName["bulwark deps/outer"][0]
	assert.False(t, out.Parent.IsValid(), "without a caller's span, the attempt's is a root")
	require.Len(t, byName["bulwark deps/inner"], 2)
	for _, s := range byName["bulwark deps/inner"] {
		assert.Equal(t, out.SpanContext.SpanID(), s.Parent.SpanID(), "both inner attempts are children of the outer attempt")
	}
}

func TestHookShortCircuitedSpan(t *testing.T) {
	exp, tp := newTracing(t)
	_, mp := newReader(t)
	h, err := NewHook(Config{TracerProvider: tp, MeterProvider: mp, AttemptSpans: true})
	require.NoError(t, err)
	reg, _ := newRegistry(t, h)
	g, err := reg.NewGroup("deps", command.GroupConfig{Strategy: command.Semaphore})
	require.NoError(t, err)
	g.Breaker().SetMode(circuit.ForcedOpen)
	_, err = command.Execute(context.Background(), g, call{name: "get"})
	require.ErrorIs(t, err, command.ErrRefused)
	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	a := attrMap(spans[0].Attributes)
	assert.Equal(t, "short_circuited", a[KeyEvent].AsString())
	assert.Equal(t, "fallback_missing", a[KeyFallback].AsString())
	assert.Equal(t, "open", a[KeyGroupState].AsString())
	assert.Equal(t, codes.Error, spans[0].Status.Code)
}

func TestHookHistograms(t *testing.T) {
	r, mp := newReader(t)
	h, err := NewHook(Config{MeterProvider: mp})
	require.NoError(t, err)
	reg, clock := newRegistry(t, h)
	g := retrying(t, reg, clock)
	var runs atomic.Int64
	for range 4 {
		_, err := command.Execute(context.Background(), g, flaky{name: "get", runs: &runs, clock: clock, took: 20 * time.Millisecond})
		require.NoError(t, err)
	}
	runs.Store(0) // the next call fails once, then succeeds
	_, err = command.Execute(context.Background(), g, flaky{name: "get", fails: 1, runs: &runs, clock: clock, took: 200 * time.Millisecond})
	require.NoError(t, err)

	c := collect(t, r)
	kv := []string{"bulwark.group", "deps", "bulwark.command", "get"}
	d, ok := c.histogram(t, "bulwark.command.duration", append(kv, "bulwark.event", "success")...)
	require.True(t, ok)
	assert.EqualValues(t, 5, d.Count, "one per call, retried or not")
	assert.Equal(t, buckets, d.Bounds)
	_, ok = c.histogram(t, "bulwark.command.duration", append(kv, "bulwark.event", "failure")...)
	assert.False(t, ok, "a retried attempt is not a call")
	failedRun, _ := c.histogram(t, "bulwark.command.run.duration", append(kv, "bulwark.event", "failure")...)
	assert.EqualValues(t, 1, failedRun.Count, "the retried attempt's Run")
	assert.InDelta(t, 0.2, failedRun.Sum, 1e-9)
	run, _ := c.histogram(t, "bulwark.command.run.duration", append(kv, "bulwark.event", "success")...)
	assert.EqualValues(t, 5, run.Count)
	assert.InDelta(t, 4*0.02+0.2, run.Sum, 1e-9)
	assert.GreaterOrEqual(t, d.Sum, 4*0.02+2*0.2, "the retried call's latency holds both attempts (and the backoff)")
}
