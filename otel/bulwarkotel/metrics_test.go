package bulwarkotel

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// service fills reg with two groups:
//   - users (semaphore): get: 3 successes of 20 ms, 1 failure served by
//     its fallback;
//   - pay (pool of 2): charge: 2 failures that open its breaker, then 1
//     short-circuited call.
func service(t *testing.T, reg *command.Registry, clock *metrics.ManualClock) (users, pay *command.Group) {
	t.Helper()
	users, err := reg.NewGroup("users", command.GroupConfig{Strategy: command.Semaphore, Timeout: command.NoTimeout})
	require.NoError(t, err)
	pay, err = reg.NewGroup("pay", command.GroupConfig{MaxConcurrent: 2, Timeout: command.NoTimeout,
		CommandBreaker: circuit.Config{MinRequests: 2, FailureRatio: 0.5}})
	require.NoError(t, err)
	ctx := context.Background()
	for range 3 {
		_, err := command.Execute(ctx, users, call{name: "get", took: 20 * time.Millisecond, clock: clock})
		require.NoError(t, err)
	}
	_, err = command.Execute(ctx, users, callFB{call{name: "get", err: errors.New("down"), clock: clock}})
	require.NoError(t, err, "served by the fallback")
	for range 2 {
		_, err := command.Execute(ctx, pay, call{name: "charge", err: errors.New("declined"), clock: clock})
		require.Error(t, err)
	}
	_, err = command.Execute(ctx, pay, call{name: "charge", clock: clock})
	require.ErrorIs(t, err, command.ErrRefused)
	return users, pay
}

// failProbe lets pay's charge breaker turn half-open and fails its probe:
// two transitions, open → half-open (open_elapsed) and half-open → open
// (probe_failed).
func failProbe(t *testing.T, pay *command.Group, clock *metrics.ManualClock) {
	t.Helper()
	b, ok := pay.CommandBreaker("charge")
	require.True(t, ok)
	clock.Advance(b.Snapshot().RetryAfter)
	_, info, err := command.ExecuteInfo(context.Background(), pay, call{name: "charge", err: errors.New("declined")})
	require.Error(t, err)
	require.True(t, info.Events.Has(metrics.Probe), "the call was the half-open probe")
	require.Equal(t, circuit.Open, b.State())
}

func TestNewMetricsNilRegistry(t *testing.T) {
	_, err := NewMetrics(nil, Config{})
	assert.ErrorIs(t, err, ErrNilRegistry)
}

func TestMetricsReportTheSnapshot(t *testing.T) {
	reg, clock := newRegistry(t, nil)
	_, pay := service(t, reg, clock)
	r, mp := newReader(t)
	m, err := NewMetrics(reg, Config{MeterProvider: mp})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })

	c := collect(t, r)
	ev := func(group, cmd, event string) int64 {
		v, ok := c.value(t, "bulwark.command.events", "bulwark.group", group, "bulwark.command", cmd, "bulwark.event", event)
		require.True(t, ok, "events{%s,%s,%s}", group, cmd, event)
		return v
	}
	assert.EqualValues(t, 3, ev("users", "get", "success"))
	assert.EqualValues(t, 1, ev("users", "get", "failure"))
	assert.EqualValues(t, 1, ev("users", "get", "fallback_success"))
	assert.EqualValues(t, 0, ev("users", "get", "exception_thrown"))
	assert.EqualValues(t, 2, ev("pay", "charge", "failure"))
	assert.EqualValues(t, 1, ev("pay", "charge", "short_circuited"))
	assert.EqualValues(t, 3, ev("pay", "charge", "exception_thrown"))
	pts, _ := c.int64s("bulwark.command.events")
	assert.Len(t, pts, 2*int(metrics.NumEvents), "one series per event kind and command, zeros included")

	calls := func(group, cmd string) int64 {
		v, ok := c.value(t, "bulwark.command.calls", "bulwark.group", group, "bulwark.command", cmd)
		require.True(t, ok)
		return v
	}
	assert.EqualValues(t, 4, calls("users", "get"))
	assert.EqualValues(t, 3, calls("pay", "charge"))

	state := func(name string, kv ...string) map[string]int64 {
		out := map[string]int64{}
		for _, s := range []string{"closed", "open", "half-open"} {
			v, ok := c.value(t, name, append(kv, "bulwark.circuit.state", s)...)
			require.True(t, ok, "%s %v %s", name, kv, s)
			out[s] = v
		}
		return out
	}
	assert.Equal(t, map[string]int64{"closed": 0, "open": 1, "half-open": 0},
		state("bulwark.command.circuit.state", "bulwark.group", "pay", "bulwark.command", "charge"))
	assert.Equal(t, map[string]int64{"closed": 1, "open": 0, "half-open": 0},
		state("bulwark.group.circuit.state", "bulwark.group", "pay"), "the group's breaker needs 20 calls")
	mode, ok := c.value(t, "bulwark.command.circuit.mode", "bulwark.group", "pay", "bulwark.command", "charge", "bulwark.circuit.mode", "normal")
	require.True(t, ok)
	assert.EqualValues(t, 1, mode)

	capacity, ok := c.value(t, "bulwark.bulkhead.capacity", "bulwark.group", "pay")
	require.True(t, ok)
	assert.EqualValues(t, 2, capacity)
	queueCap, ok := c.value(t, "bulwark.bulkhead.queue.capacity", "bulwark.group", "pay")
	require.True(t, ok)
	assert.EqualValues(t, 0, queueCap)
	completed, ok := c.value(t, "bulwark.bulkhead.completed", "bulwark.group", "pay")
	require.True(t, ok)
	assert.EqualValues(t, 2, completed, "two Runs returned from the pool")
	inFlight, ok := c.value(t, "bulwark.command.in_flight", "bulwark.group", "users", "bulwark.command", "get")
	require.True(t, ok)
	assert.Zero(t, inFlight)

	tr := func(from, to, reason string) (int64, bool) {
		return c.value(t, "bulwark.command.circuit.transitions", "bulwark.group", "pay", "bulwark.command", "charge",
			"bulwark.circuit.from", from, "bulwark.circuit.to", to, "bulwark.circuit.reason", reason)
	}
	n, ok := tr("closed", "open", "error_ratio")
	require.True(t, ok, "the trip before NewMetrics is counted from the breaker's history")
	assert.EqualValues(t, 1, n)

	failProbe(t, pay, clock)
	c = collect(t, r)
	n, _ = tr("closed", "open", "error_ratio")
	assert.EqualValues(t, 1, n, "counted once")
	n, _ = tr("open", "half-open", "open_elapsed")
	assert.EqualValues(t, 1, n)
	n, _ = tr("half-open", "open", "probe_failed")
	assert.EqualValues(t, 1, n)
	assert.EqualValues(t, 0, c.sum(t, "bulwark.group.circuit.transitions", "bulwark.group", "pay"))
}

func TestMetricsDegradedRatio(t *testing.T) {
	reg, clock := newRegistry(t, nil)
	service(t, reg, clock)
	r, mp := newReader(t)
	m, err := NewMetrics(reg, Config{MeterProvider: mp})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	d, ok := collect(t, r)["bulwark.command.degraded.ratio"].(metricdata.Gauge[float64])
	require.True(t, ok)
	got := map[attribute.Distinct]float64{}
	for _, p := range d.DataPoints {
		got[p.Attributes.Equivalent()] = p.Value
	}
	assert.InDelta(t, 0.25, got[attrs("bulwark.group", "users", "bulwark.command", "get").Equivalent()], 1e-9,
		"1 of the window's 4 calls was served by the fallback")
	assert.Zero(t, got[attrs("bulwark.group", "pay", "bulwark.command", "charge").Equivalent()])
}

// TestTransitionsBetweenCollections: every transition is counted, however
// many happen between two collections (more than the breaker's history
// holds), where a state gauge sees only the last state.
func TestTransitionsBetweenCollections(t *testing.T) {
	reg, clock := newRegistry(t, nil)
	_, pay := service(t, reg, clock)
	r, mp := newReader(t)
	m, err := NewMetrics(reg, Config{MeterProvider: mp})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	collect(t, r)
	const flaps = 12
	for range flaps {
		failProbe(t, pay, clock)
	}
	c := collect(t, r)
	base := []string{"bulwark.group", "pay", "bulwark.command", "charge"}
	n, _ := c.value(t, "bulwark.command.circuit.transitions", append(base,
		"bulwark.circuit.from", "open", "bulwark.circuit.to", "half-open", "bulwark.circuit.reason", "open_elapsed")...)
	assert.EqualValues(t, flaps, n)
	n, _ = c.value(t, "bulwark.command.circuit.transitions", append(base,
		"bulwark.circuit.from", "half-open", "bulwark.circuit.to", "open", "bulwark.circuit.reason", "probe_failed")...)
	assert.EqualValues(t, flaps, n)
	assert.EqualValues(t, 1+2*flaps, c.sum(t, "bulwark.command.circuit.transitions", base...))
	open, _ := c.value(t, "bulwark.command.circuit.state", append(base, "bulwark.circuit.state", "open")...)
	assert.EqualValues(t, 1, open, "the gauge shows only where the flaps ended")
}

// TestMetricsFollowTheRegistry: a command first called after NewMetrics
// appears at the next collection, with its breaker's transitions; a closed
// group's series go.
func TestMetricsFollowTheRegistry(t *testing.T) {
	reg, clock := newRegistry(t, nil)
	r, mp := newReader(t)
	m, err := NewMetrics(reg, Config{MeterProvider: mp})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	assert.Empty(t, collect(t, r)["bulwark.command.events"], "no group yet")

	users, pay := service(t, reg, clock)
	c := collect(t, r)
	n, ok := c.value(t, "bulwark.command.circuit.transitions", "bulwark.group", "pay", "bulwark.command", "charge",
		"bulwark.circuit.from", "closed", "bulwark.circuit.to", "open", "bulwark.circuit.reason", "error_ratio")
	require.True(t, ok, "a breaker first seen at a collection brings its history")
	assert.EqualValues(t, 1, n)

	require.NoError(t, pay.Close(context.Background()))
	c = collect(t, r)
	assert.Zero(t, c.sum(t, "bulwark.command.calls", "bulwark.group", "pay"), "pay's series are gone")
	assert.EqualValues(t, 4, c.sum(t, "bulwark.command.calls", "bulwark.group", "users"))
	assert.Zero(t, c.sum(t, "bulwark.command.circuit.transitions", "bulwark.group", "pay"), "and its transitions")
	_ = users
}

// TestTransitionsBeforeMetricsExisted: transitions a breaker made before
// NewMetrics, more than its history of eight holds, are all counted.
func TestTransitionsBeforeMetricsExisted(t *testing.T) {
	reg, clock := newRegistry(t, nil)
	_, pay := service(t, reg, clock)
	const flaps = 12
	for range flaps {
		failProbe(t, pay, clock)
	}
	r, mp := newReader(t)
	m, err := NewMetrics(reg, Config{MeterProvider: mp})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	c := collect(t, r)
	base := []string{"bulwark.group", "pay", "bulwark.command", "charge"}
	assert.EqualValues(t, 1+2*flaps, c.sum(t, "bulwark.command.circuit.transitions", base...))
}

func TestMetricsClose(t *testing.T) {
	reg, clock := newRegistry(t, nil)
	_, pay := service(t, reg, clock)
	r, mp := newReader(t)
	m, err := NewMetrics(reg, Config{MeterProvider: mp})
	require.NoError(t, err)
	require.NotEmpty(t, collect(t, r))
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "idempotent")
	failProbe(t, pay, clock) // transitions after Close reach no observer
	assert.Empty(t, collect(t, r)["bulwark.command.events"])
}
