package bulwarkotel

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// call is a test command: Run advances the manual clock (if any) by took
// and returns err.
type call struct {
	name  string
	err   error
	took  time.Duration
	clock *metrics.ManualClock
}

func (c call) Name() string { return c.name }

func (c call) Run(context.Context) (int, error) {
	if c.clock != nil {
		c.clock.Advance(c.took)
	}
	return 1, c.err
}

// callFB is a call whose fallback serves 0.
type callFB struct{ call }

func (c callFB) Fallback(context.Context, error) (int, error) { return 0, nil }

// quiet is a logger that writes nothing.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newRegistry returns a registry on a manual clock with hook h (nil: none),
// closed at the test's end.
func newRegistry(t *testing.T, h command.CallHook) (*command.Registry, *metrics.ManualClock) {
	t.Helper()
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: quiet, Hook: h})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	return reg, clock
}

// newReader returns a manual reader and a meter provider reading into it,
// shut down at the test's end.
func newReader(t *testing.T) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { require.NoError(t, mp.Shutdown(context.Background())) })
	return r, mp
}

// collected is one collection's metrics by name.
type collected map[string]metricdata.Aggregation

// collect collects r once.
func collect(t *testing.T, r *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := collected{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// attrs builds an attribute set from key, value pairs.
func attrs(kv ...string) *attribute.Set {
	a := make([]attribute.KeyValue, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		a = append(a, attribute.String(kv[i], kv[i+1]))
	}
	set := attribute.NewSet(a...)
	return &set
}

// int64s returns the points of metric name (a sum or a gauge of int64) by
// attribute set, and whether the metric was there.
func (c collected) int64s(name string) (map[attribute.Distinct]int64, bool) {
	out := map[attribute.Distinct]int64{}
	var pts []metricdata.DataPoint[int64]
	switch d := c[name].(type) {
	case metricdata.Sum[int64]:
		pts = d.DataPoints
	case metricdata.Gauge[int64]:
		pts = d.DataPoints
	default:
		return nil, false
	}
	for _, p := range pts {
		out[p.Attributes.Equivalent()] = p.Value
	}
	return out, true
}

// value returns the value of metric name at the attributes kv, and
// whether that series was there.
func (c collected) value(t *testing.T, name string, kv ...string) (int64, bool) {
	t.Helper()
	pts, ok := c.int64s(name)
	require.True(t, ok, "metric %s", name)
	v, ok := pts[attrs(kv...).Equivalent()]
	return v, ok
}

// sum returns the sum of metric name's points whose attributes include kv
// (0 for a metric without points).
func (c collected) sum(t *testing.T, name string, kv ...string) int64 {
	t.Helper()
	if c[name] == nil {
		return 0
	}
	d, ok := c[name].(metricdata.Sum[int64])
	require.True(t, ok, "metric %s is an int64 sum", name)
	var s int64
points:
	for _, p := range d.DataPoints {
		for i := 0; i < len(kv); i += 2 {
			if v, ok := p.Attributes.Value(attribute.Key(kv[i])); !ok || v.AsString() != kv[i+1] {
				continue points
			}
		}
		s += p.Value
	}
	return s
}

// histogram returns the point of histogram name at the attributes kv.
func (c collected) histogram(t *testing.T, name string, kv ...string) (metricdata.HistogramDataPoint[float64], bool) {
	t.Helper()
	d, ok := c[name].(metricdata.Histogram[float64])
	require.True(t, ok, "metric %s is a float64 histogram", name)
	want := attrs(kv...).Equivalent()
	for _, p := range d.DataPoints {
		if p.Attributes.Equivalent() == want {
			return p, true
		}
	}
	return metricdata.HistogramDataPoint[float64]{}, false
}
