package prom

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/alert"
	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/adaptive"
	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/command/throttle"
	"github.com/bulwark-go/bulwark/metrics"
)

// call is a test command without a fallback: Run advances the manual
// clock by took and returns err.
type call struct {
	name  string
	err   error
	took  time.Duration
	clock *metrics.ManualClock
}

func (c call) Name() string { return c.name }

func (c call) Run(context.Context) (int, error) {
	c.clock.Advance(c.took)
	return 1, c.err
}

// callFB is a call whose fallback serves 0.
type callFB struct{ call }

func (c callFB) Fallback(context.Context, error) (int, error) { return 0, nil }

// service builds a registry on a manual clock with two groups:
//   - users (semaphore): get: 3 successes of 20 ms, 1 failure served by
//     its fallback;
//   - pay (pool of 2): charge: 2 failures that open its breaker, then 1
//     short-circuited call; then 3 s pass.
func service(t *testing.T) *command.Registry {
	t.Helper()
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	users, err := reg.NewGroup("users", command.GroupConfig{Strategy: command.Semaphore, Timeout: command.NoTimeout})
	require.NoError(t, err)
	pay, err := reg.NewGroup("pay", command.GroupConfig{MaxConcurrent: 2, Timeout: command.NoTimeout,
		CommandBreaker: circuit.Config{MinRequests: 2, FailureRatio: 0.5}})
	require.NoError(t, err)
	ctx := context.Background()
	for range 3 {
		_, err := command.Execute(ctx, users, call{name: "get", took: 20 * time.Millisecond, clock: clock})
		require.NoError(t, err)
	}
	_, err = command.Execute(ctx, users, callFB{call{name: "get", err: errors.New("down"), took: 20 * time.Millisecond, clock: clock}})
	require.NoError(t, err, "served by the fallback")
	for range 2 {
		_, err := command.Execute(ctx, pay, call{name: "charge", err: errors.New("declined"), clock: clock})
		require.Error(t, err)
	}
	_, err = command.Execute(ctx, pay, call{name: "charge", clock: clock})
	require.ErrorIs(t, err, command.ErrRefused)
	clock.Advance(3 * time.Second)
	return reg
}

// scrape registers c in a pedantic registry (which checks every metric
// against Describe), gathers, writes the text exposition and parses it
// back with the official parser.
func scrape(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	pr := prometheus.NewPedanticRegistry()
	require.NoError(t, pr.Register(c))
	fams, err := pr.Gather()
	require.NoError(t, err)
	var buf bytes.Buffer
	for _, f := range fams {
		_, err := expfmt.MetricFamilyToText(&buf, f)
		require.NoError(t, err)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	parsed, err := parser.TextToMetricFamilies(&buf)
	require.NoError(t, err, "the exposition parses")
	return parsed
}

// series returns the series of family name with exactly the given labels
// (name, value pairs), failing if there is none.
func series(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) *dto.Metric {
	t.Helper()
	f, ok := fams[name]
	require.True(t, ok, "family %s", name)
	want := map[string]string{}
	for i := 0; i < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		for _, l := range m.GetLabel() {
			if want[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		return m
	}
	t.Fatalf("no series %s%v", name, labels)
	return nil
}

// value returns the value of the counter or gauge of family name with
// exactly the given labels.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	m := series(t, fams, name, labels...)
	switch fams[name].GetType() {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	}
	t.Fatalf("family %s has type %v", name, fams[name].GetType())
	return 0
}

func TestCollectorExportsWhatTheServiceDid(t *testing.T) {
	c, err := New(service(t), WithDetail())
	require.NoError(t, err)
	fams := scrape(t, c)

	get := []string{"group", "users", "command", "get"}
	ev := func(cmd []string, event string) float64 {
		return value(t, fams, "bulwark_command_events_total", append(cmd, "event", event)...)
	}
	assert.Equal(t, 4.0, value(t, fams, "bulwark_command_calls_total", get...))
	assert.Equal(t, 3.0, ev(get, "success"))
	assert.Equal(t, 1.0, ev(get, "failure"))
	assert.Equal(t, 1.0, ev(get, "fallback_success"))
	assert.Equal(t, 0.0, ev(get, "exception_thrown"))
	assert.Equal(t, 0.25, value(t, fams, "bulwark_command_degraded_ratio", get...))
	assert.Equal(t, dto.MetricType_COUNTER, fams["bulwark_command_events_total"].GetType())

	charge := []string{"group", "pay", "command", "charge"}
	assert.Equal(t, 3.0, value(t, fams, "bulwark_command_calls_total", charge...))
	assert.Equal(t, 2.0, ev(charge, "failure"))
	assert.Equal(t, 1.0, ev(charge, "short_circuited"))
	assert.Equal(t, 3.0, ev(charge, "exception_thrown"))
	assert.Equal(t, 3.0, ev(charge, "fallback_missing"))
	assert.Equal(t, 1.0, value(t, fams, "bulwark_command_circuit_state", append(charge, "state", "open")...))
	assert.Equal(t, 0.0, value(t, fams, "bulwark_command_circuit_state", append(charge, "state", "closed")...))
	assert.Equal(t, 0.0, value(t, fams, "bulwark_command_circuit_state", append(charge, "state", "half-open")...))
	assert.Equal(t, 3.0, value(t, fams, "bulwark_command_circuit_state_seconds", charge...), "opened 3 s ago on the manual clock")
	assert.Equal(t, 1.0, value(t, fams, "bulwark_command_circuit_state", append(get, "state", "closed")...))
	assert.Equal(t, 1.0, value(t, fams, "bulwark_group_circuit_state", "group", "pay", "state", "closed"))

	assert.Equal(t, 2.0, value(t, fams, "bulwark_bulkhead_capacity", "group", "pay"))
	assert.Equal(t, 0.0, value(t, fams, "bulwark_bulkhead_queue_capacity", "group", "users"))
	assert.Equal(t, 0.0, value(t, fams, "bulwark_bulkhead_active", "group", "pay"))
	assert.Equal(t, 2.0, value(t, fams, "bulwark_bulkhead_completed_total", "group", "pay"))
	assert.Equal(t, 0.0, value(t, fams, "bulwark_bulkhead_rejected_total", "group", "pay"))

	// The histogram: the 4 calls of 20 ms (Run and caller alike), in the
	// buckets from 25 ms up.
	var h *dto.Histogram
	for _, m := range fams["bulwark_command_latency_seconds"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["command"] == "get" && labels["phase"] == "total" {
			h = m.GetHistogram()
		}
	}
	require.NotNil(t, h, "histogram of users/get, phase total")
	assert.Equal(t, uint64(4), h.GetSampleCount())
	assert.InDelta(t, 0.080, h.GetSampleSum(), 1e-9)
	for _, b := range h.GetBucket() {
		want := uint64(0)
		if b.GetUpperBound() >= 0.025 {
			want = 4
		}
		assert.Equal(t, want, b.GetCumulativeCount(), "bucket le=%v", b.GetUpperBound())
	}
	assert.Len(t, h.GetBucket(), len(buckets)+1, "and +Inf")

	// Every call took 20 ms of Run: the window's quantiles, within the
	// histogram's bin width (1/32), in a summary whose count and sum are
	// the histogram's.
	win := summary(t, fams, "bulwark_command_latency_window_seconds", append(get, "phase", "run")...)
	assert.InDelta(t, 0.020, quantile(t, win, 0.5), 0.020/32)
	assert.InDelta(t, 0.020, quantile(t, summary(t, fams, "bulwark_command_latency_window_seconds", append(get, "phase", "total")...), 0.995), 0.020/32)
	assert.Len(t, win.GetQuantile(), len(metrics.Quantiles()))
	assert.Equal(t, uint64(4), win.GetSampleCount())
	assert.InDelta(t, 0.080, win.GetSampleSum(), 1e-9)
	assert.Equal(t, dto.MetricType_SUMMARY, fams["bulwark_command_latency_window_seconds"].GetType())
	assert.InDelta(t, 0.020, value(t, fams, "bulwark_command_latency_window_mean_seconds", append(get, "phase", "run")...), 0.020/32)
	assert.Equal(t, 0.0, value(t, fams, "bulwark_group_renamed_commands", "group", "users"))
	assert.Equal(t, 0.0, value(t, fams, "bulwark_collector_dropped_series_total"))
}

// summary returns the summary of family name with exactly the given
// labels.
func summary(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) *dto.Summary {
	t.Helper()
	require.Equal(t, dto.MetricType_SUMMARY, fams[name].GetType(), name)
	return series(t, fams, name, labels...).GetSummary()
}

// quantile returns quantile q of s, failing if s has none.
func quantile(t *testing.T, s *dto.Summary, q float64) float64 {
	t.Helper()
	for _, sq := range s.GetQuantile() {
		if sq.GetQuantile() == q {
			return sq.GetValue()
		}
	}
	t.Fatalf("no quantile %v in %v", q, s)
	return 0
}

// TestCollectorExportsEveryEventKind: the events counter is generic over
// metrics.Event, so an event kind added to bulwark is exported at once.
func TestCollectorExportsEveryEventKind(t *testing.T) {
	c, err := New(service(t), WithDetail())
	require.NoError(t, err)
	fams := scrape(t, c)
	var got []string
	for _, m := range fams["bulwark_command_events_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["command"] == "get" {
			got = append(got, labels["event"])
		}
	}
	assert.Len(t, got, int(metrics.NumEvents))
	assert.Contains(t, got, "queue_timeout")
	assert.Contains(t, got, "slow")
}

// TestCollectorCountersNeverDecrease: the counters come from the
// cumulative counts, so they keep growing when the calls leave the rolling
// window, while the window's gauges follow the window.
func TestCollectorCountersNeverDecrease(t *testing.T) {
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("users", command.GroupConfig{Strategy: command.Semaphore, Timeout: command.NoTimeout})
	require.NoError(t, err)
	c, err := New(reg, WithDetail())
	require.NoError(t, err)
	get := []string{"group", "users", "command", "get"}
	for i := range 3 {
		_, err := command.Execute(context.Background(), g, callFB{call{name: "get", err: errors.New("down"), clock: clock}})
		require.NoError(t, err)
		fams := scrape(t, c)
		assert.Equal(t, float64(i+1), value(t, fams, "bulwark_command_calls_total", get...))
		assert.Equal(t, float64(i+1), value(t, fams, "bulwark_command_events_total", append(get, "event", "fallback_success")...))
		assert.Equal(t, 1.0, value(t, fams, "bulwark_command_degraded_ratio", get...), "one call in the window, degraded")
		clock.Advance(time.Minute) // the call leaves the 10 s window
	}
	fams := scrape(t, c)
	assert.Equal(t, 3.0, value(t, fams, "bulwark_command_calls_total", get...))
	assert.Equal(t, 0.0, value(t, fams, "bulwark_command_degraded_ratio", get...), "empty window")
	for _, m := range fams["bulwark_command_latency_window_seconds"].GetMetric() {
		assert.Empty(t, m.GetSummary().GetQuantile(), "no quantile for an empty window")
		assert.Equal(t, uint64(3), m.GetSummary().GetSampleCount(), "the count keeps what left the window")
	}
	_, ok := fams["bulwark_command_latency_window_mean_seconds"]
	assert.False(t, ok, "no mean for an empty window")
	for _, m := range fams["bulwark_command_latency_seconds"].GetMetric() {
		assert.Equal(t, uint64(3), m.GetHistogram().GetSampleCount(), "the histogram keeps what left the window")
	}
}

func TestNewRejectsNilSource(t *testing.T) {
	_, err := New(nil)
	require.ErrorIs(t, err, ErrNilSource)
}

// refuse is a rate limiter that refuses every call.
type refuse struct{}

func (refuse) Admit(context.Context) error { return errors.New("over the limit") }

// TestCollectorExportsModesAlertsAndGeneration: breaker modes (one series
// per mode), the alert tier reached (a series only while one is), the
// degraded alarm, the config generation, and RATE_LIMITED through the
// generic events counter.
func TestCollectorExportsModesAlertsAndGeneration(t *testing.T) {
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	alerts, err := alert.New(alert.Config{Tiers: []alert.Tier{{Name: "page", After: 2 * time.Second}},
		DegradedMinCalls: 1, Interval: time.Hour})
	require.NoError(t, err)
	cfg := command.GroupConfig{Strategy: command.Semaphore, Timeout: command.NoTimeout,
		CommandBreaker: circuit.Config{MinRequests: 2, FailureRatio: 0.5}, Alerts: alerts}
	pay, err := reg.NewGroup("pay", cfg)
	require.NoError(t, err)
	ctx := context.Background()
	for range 2 {
		_, err := command.Execute(ctx, pay, call{name: "charge", err: errors.New("declined"), clock: clock})
		require.Error(t, err)
	}
	_, err = command.Execute(ctx, pay, callFB{call{name: "get", err: errors.New("down"), clock: clock}})
	require.NoError(t, err, "served by the fallback")
	pay.Breaker().SetMode(circuit.ObserveOnly)
	get, ok := pay.CommandBreaker("get")
	require.True(t, ok)
	get.SetMode(circuit.ForcedClosed)
	cfg.RateLimit = refuse{}
	require.NoError(t, pay.Reconfigure(cfg))
	require.NoError(t, pay.Reconfigure(cfg))
	_, err = command.Execute(ctx, pay, call{name: "get", clock: clock})
	require.ErrorIs(t, err, command.ErrRefused)
	clock.Advance(3 * time.Second)
	alerts.Check()

	c, err := New(reg, WithDetail())
	require.NoError(t, err)
	fams := scrape(t, c)
	chargeL := []string{"group", "pay", "command", "charge"}
	getL := []string{"group", "pay", "command", "get"}
	mode := func(name string, labels []string) map[string]float64 {
		got := map[string]float64{}
		for _, m := range []string{"normal", "forced-open", "forced-closed", "observe-only"} {
			got[m] = value(t, fams, name, append(labels, "mode", m)...)
		}
		return got
	}
	assert.Equal(t, map[string]float64{"normal": 0, "forced-open": 0, "forced-closed": 0, "observe-only": 1},
		mode("bulwark_group_circuit_mode", []string{"group", "pay"}))
	assert.Equal(t, map[string]float64{"normal": 0, "forced-open": 0, "forced-closed": 1, "observe-only": 0},
		mode("bulwark_command_circuit_mode", getL))
	assert.Equal(t, map[string]float64{"normal": 1, "forced-open": 0, "forced-closed": 0, "observe-only": 0},
		mode("bulwark_command_circuit_mode", chargeL))

	assert.Equal(t, 1.0, value(t, fams, "bulwark_command_alert_tier", append(chargeL, "tier", "page")...), "open 3 s, tier at 2 s")
	assert.Len(t, fams["bulwark_command_alert_tier"].GetMetric(), 1, "no series for get, in no outage")
	_, ok = fams["bulwark_group_alert_tier"]
	assert.False(t, ok, "the group's breaker is closed: no tier series")

	assert.Equal(t, 1.0, value(t, fams, "bulwark_command_degraded_alarm", getL...), "get: 1 call of 2 degraded")
	assert.Equal(t, 0.0, value(t, fams, "bulwark_command_degraded_alarm", chargeL...))
	assert.Equal(t, 2.0, value(t, fams, "bulwark_group_config_generation", "group", "pay"))
	assert.Equal(t, 1.0, value(t, fams, "bulwark_command_events_total", append(getL, "event", "rate_limited")...))
}

// idemCall is a call that may be retried.
type idemCall struct{ call }

func (idemCall) Idempotent() bool { return true }

// TestCollectorExportsRetried: the attempts a group retried are counted
// under event="retried", beside their own outcome; calls_total counts the
// callers' calls, each once.
func TestCollectorExportsRetried(t *testing.T) {
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("api", command.GroupConfig{Strategy: command.Semaphore, Timeout: command.NoTimeout,
		Retry: retry.Config{MaxAttempts: 3, NoBudget: true, Sleep: func(context.Context, time.Duration) error { return nil }}})
	require.NoError(t, err)
	for range 2 {
		_, err := command.Execute(context.Background(), g, idemCall{call{name: "fetch", err: errors.New("down"), clock: clock}})
		require.Error(t, err)
	}

	c, err := New(reg)
	require.NoError(t, err)
	fams := scrape(t, c)
	l := []string{"group", "api", "command", "fetch"}
	assert.Equal(t, 4.0, value(t, fams, "bulwark_command_events_total", append(l, "event", "retried")...), "2 calls, 2 retried attempts each")
	assert.Equal(t, 6.0, value(t, fams, "bulwark_command_events_total", append(l, "event", "failure")...), "every attempt")
	assert.Equal(t, 2.0, value(t, fams, "bulwark_command_calls_total", l...), "each call once")
}

// TestCollectorExportsFlapsBetweenScrapes: a breaker that trips, fails a
// trial and recovers between two scrapes looks closed to both, yet the
// transitions counter tells every move, by kind; the group's breaker is
// counted with command="".
func TestCollectorExportsFlapsBetweenScrapes(t *testing.T) {
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	pay, err := reg.NewGroup("pay", command.GroupConfig{Strategy: command.Semaphore, Timeout: command.NoTimeout,
		CommandBreaker: circuit.Config{MinRequests: 2, FailureRatio: 0.5, OpenDuration: time.Second,
			HalfOpenSuccesses: 1}})
	require.NoError(t, err)
	c, err := New(reg)
	require.NoError(t, err)
	ctx := context.Background()
	run := func(fail bool) {
		var e error
		if fail {
			e = errors.New("down")
		}
		_, _ = command.Execute(ctx, pay, call{name: "charge", err: e, clock: clock})
	}
	run(false)
	fams := scrape(t, c)
	_, ok := fams["bulwark_breaker_transitions_total"]
	assert.False(t, ok, "no transition yet, no series")

	run(true)
	run(true) // trips: error_ratio
	clock.Advance(time.Second)
	run(true) // half-open probe fails: probe_failed
	clock.Advance(2 * time.Second)
	run(false) // half-open probe succeeds: probes_succeeded
	pay.Breaker().SetMode(circuit.ForcedOpen)
	pay.Breaker().SetMode(circuit.Normal)

	fams = scrape(t, c)
	assert.Equal(t, 1.0, value(t, fams, "bulwark_command_circuit_state", "group", "pay", "command", "charge", "state", "closed"), "closed at both scrapes")
	tr := func(cmd, from, to, reason string) float64 {
		return value(t, fams, "bulwark_breaker_transitions_total", "group", "pay", "command", cmd, "from", from, "to", to, "reason", reason)
	}
	assert.Equal(t, 1.0, tr("charge", "closed", "open", "error_ratio"))
	assert.Equal(t, 2.0, tr("charge", "open", "half-open", "open_elapsed"))
	assert.Equal(t, 1.0, tr("charge", "half-open", "open", "probe_failed"))
	assert.Equal(t, 1.0, tr("charge", "half-open", "closed", "probes_succeeded"))
	assert.Equal(t, 1.0, tr("", "closed", "open", "forced"))
	assert.Equal(t, 1.0, tr("", "open", "closed", "forced"))
	assert.Len(t, fams["bulwark_breaker_transitions_total"].GetMetric(), 6, "one series per kind seen, no more")
}

// seriesByCommand returns, per group/command, the samples of fams as the
// text exposition writes them (a summary's quantiles, _sum and _count each
// count, as they are series to Prometheus), keyed by name and labels.
func seriesByCommand(fams map[string]*dto.MetricFamily) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var key, cmd string
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
				if l.GetName() == "command" {
					cmd = l.GetValue()
				}
			}
			if cmd == "" {
				continue
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == "group" {
					cmd = l.GetValue() + "/" + cmd
				}
			}
			if out[cmd] == nil {
				out[cmd] = map[string]float64{}
			}
			add := func(suffix string, v float64) { out[cmd][name+suffix+key] = v }
			switch {
			case m.Summary != nil:
				for _, q := range m.Summary.GetQuantile() {
					add(fmt.Sprintf(",quantile=%v", q.GetQuantile()), q.GetValue())
				}
				add("_sum", m.Summary.GetSampleSum())
				add("_count", float64(m.Summary.GetSampleCount()))
			case m.Histogram != nil:
				for _, b := range m.Histogram.GetBucket() {
					add(fmt.Sprintf("_bucket,le=%v", b.GetUpperBound()), float64(b.GetCumulativeCount()))
				}
				add("_sum", m.Histogram.GetSampleSum())
				add("_count", float64(m.Histogram.GetSampleCount()))
			case m.Counter != nil:
				add("", m.Counter.GetValue())
			default:
				add("", m.Gauge.GetValue())
			}
		}
	}
	return out
}

// TestCollectorIsLeanByDefault: without WithDetail a command has at most
// 15 series (pay/charge, which failed, tripped and was short-circuited,
// has the most), each with the value WithDetail gives it; an event kind
// that never happened has no series; WithDetail has every kind.
func TestCollectorIsLeanByDefault(t *testing.T) {
	reg := service(t)
	lean, err := New(reg)
	require.NoError(t, err)
	detail, err := New(reg, WithDetail())
	require.NoError(t, err)
	l, d := seriesByCommand(scrape(t, lean)), seriesByCommand(scrape(t, detail))
	require.Len(t, l, 2)
	for cmd, series := range l {
		assert.LessOrEqual(t, len(series), 15, "%s: %d series by default", cmd, len(series))
		assert.Greater(t, len(d[cmd]), 3*len(series), "%s: WithDetail exports much more", cmd)
		for k, v := range series {
			if assert.Contains(t, d[cmd], k, "%s: a lean series is one of the detailed ones", cmd) {
				assert.Equal(t, d[cmd][k], v, "%s: %s", cmd, k)
			}
		}
	}
	assert.Equal(t, 15, len(l["pay/charge"]))

	ok := command.NewRegistry(command.RegistryConfig{Clock: new(metrics.ManualClock), Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { require.NoError(t, ok.Close(context.Background())) })
	g, err := ok.NewGroup("users", command.GroupConfig{Strategy: command.Semaphore, Timeout: command.NoTimeout})
	require.NoError(t, err)
	_, err = command.Execute(context.Background(), g, call{name: "get", clock: new(metrics.ManualClock)})
	require.NoError(t, err)
	healthy, err := New(ok)
	require.NoError(t, err)
	assert.Len(t, seriesByCommand(scrape(t, healthy))["users/get"], 11, "a command that only succeeded")
	timeout := ",command=charge,event=timeout,group=pay"
	assert.NotContains(t, l["pay/charge"], "bulwark_command_events_total"+timeout, "no timeout ever: no series")
	assert.Contains(t, d["pay/charge"], "bulwark_command_events_total"+timeout)
}

// The failure ratio's lower bound is exported for a breaker with the
// confidence rule on, and only for it.
func TestCollectorExportsTheErrorBound(t *testing.T) {
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("g", command.GroupConfig{Strategy: command.Semaphore, Timeout: command.NoTimeout,
		CommandBreaker: circuit.Config{MinRequests: 100, Confidence: 0.95}})
	require.NoError(t, err)
	for i := range 20 {
		c := call{name: "q", clock: clock}
		if i%2 == 1 {
			c.err = errors.New("down")
		}
		_, _ = command.Execute(context.Background(), g, c)
	}
	c, err := New(reg)
	require.NoError(t, err)
	fams := scrape(t, c)
	assert.InDelta(t, 0.2993, value(t, fams, "bulwark_command_circuit_error_bound", "group", "g", "command", "q"), 1e-4,
		"10 failures in 20 calls at 0.95")
	assert.NotContains(t, fams, "bulwark_group_circuit_error_bound", "the group's breaker judges the plain ratio")
}

// A group's client-side throttle exports the share it refuses, and its
// refusals are an event like any other.
func TestCollectorExportsTheThrottle(t *testing.T) {
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("g", command.GroupConfig{Strategy: command.Semaphore, Timeout: command.NoTimeout,
		Throttle: throttle.Config{K: 2, Rand: func() float64 { return 0.95 }}})
	require.NoError(t, err)
	for range 22 {
		_, _ = command.Execute(context.Background(), g, call{name: "q", err: errors.New("overloaded"), clock: clock})
	}
	c, err := New(reg)
	require.NoError(t, err)
	fams := scrape(t, c)
	// Nothing accepted: before call i the probability is i/(i+1), which
	// beats the draw of 0.95 from i = 20 on, so the last 2 calls of 22 are
	// throttled; all 22 are requests.
	throttled := value(t, fams, "bulwark_command_events_total", "group", "g", "command", "q", "event", "throttled")
	assert.Equal(t, 2.0, throttled)
	assert.InDelta(t, 22.0/23, value(t, fams, "bulwark_group_throttle_probability", "group", "g"), 1e-9)
}

// A group's adaptive concurrency limit exports the limit in force; a group
// without one has no series.
func TestCollectorExportsTheAdaptiveLimit(t *testing.T) {
	reg := command.NewRegistry(command.RegistryConfig{Clock: new(metrics.ManualClock), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	_, err := reg.NewGroup("adaptive", command.GroupConfig{Strategy: command.Semaphore, Adaptive: adaptive.Config{Max: 40, Initial: 12}})
	require.NoError(t, err)
	_, err = reg.NewGroup("static", command.GroupConfig{Strategy: command.Semaphore})
	require.NoError(t, err)
	c, err := New(reg)
	require.NoError(t, err)
	fams := scrape(t, c)
	assert.Equal(t, 12.0, value(t, fams, "bulwark_group_adaptive_limit", "group", "adaptive"))
	assert.Equal(t, 12.0, value(t, fams, "bulwark_bulkhead_capacity", "group", "adaptive"), "the bulkhead's size is the limit")
	require.Len(t, fams["bulwark_group_adaptive_limit"].GetMetric(), 1, "no series for the static group")
}

// TestSharedPairsMatchNewConstMetric: a command's series written with its
// shared label pairs carry the same labels, in the same order, and the
// same type and value as prometheus.NewConstMetric writes for the same
// description and label values, for names with quotes, backslashes,
// unicode and control characters; a name that is not valid UTF-8 gives no
// pairs, as NewConstMetric gives an error.
func TestSharedPairsMatchNewConstMetric(t *testing.T) {
	names := []string{"", "get", `a"b`, `back\slash`, "ünï€ødé 🚀", "tab\tnl\nnul\x00", "sp ace"}
	type written struct {
		labels  [][2]string
		counter *float64
		gauge   *float64
	}
	write := func(m prometheus.Metric) written {
		var d dto.Metric
		require.NoError(t, m.Write(&d))
		w := written{}
		for _, l := range d.GetLabel() {
			w.labels = append(w.labels, [2]string{l.GetName(), l.GetValue()})
		}
		if d.Counter != nil {
			w.counter = new(d.GetCounter().GetValue())
		}
		if d.Gauge != nil {
			w.gauge = new(d.GetGauge().GetValue())
		}
		return w
	}
	for _, group := range names {
		for _, cmd := range names {
			p := newCmdPairs(group, cmd)
			require.NotNil(t, p)
			for i, v := range []float64{0, 1, 0.25, 1e300, float64(1 << 62)} {
				cases := []struct {
					d       *prometheus.Desc
					counter bool
					p       cmdPairs
					values  []string
				}{
					{callsDesc, true, p, []string{group, cmd}},
					{inFlightDesc, false, p, []string{group, cmd}},
					{eventsDesc, true, p.with(eventPairs[i], true), []string{group, cmd, metrics.Event(i).Label()}},
					{cmdStateDesc, false, p.with(statePairs[i%len(states)], false), []string{group, cmd, states[i%len(states)].String()}},
				}
				for _, c := range cases {
					typ := prometheus.GaugeValue
					if c.counter {
						typ = prometheus.CounterValue
					}
					want, err := prometheus.NewConstMetric(c.d, typ, v, c.values...)
					require.NoError(t, err)
					got := &sharedMetric{desc: c.d, counter: c.counter, v: v, labels: c.p}
					assert.Equal(t, write(want), write(got), "%s %q %q %v", c.d, group, cmd, v)
					assert.Equal(t, want.Desc(), got.Desc())
				}
			}
		}
	}
	assert.Nil(t, newCmdPairs("ok", "bad\xff"))
	assert.Nil(t, newCmdPairs("bad\xfe", "ok"))
	assert.Nil(t, newCmdPairs("bad\xfe", "ok").with(statePairs[0], false))
	_, err := prometheus.NewConstMetric(callsDesc, prometheus.CounterValue, 1, "ok", "bad\xff")
	assert.Error(t, err)
}

// TestWindowMatchesNewConstSummary: the latency summary window sends, lean
// and in detail, for a window with and without calls, carries the labels,
// count, sum and quantiles (sorted) that prometheus.NewConstSummary writes
// for the same values, over odd names.
func TestWindowMatchesNewConstSummary(t *testing.T) {
	type written struct {
		labels    [][2]string
		count     uint64
		sum       float64
		quantiles [][2]float64
	}
	write := func(m prometheus.Metric) written {
		var d dto.Metric
		require.NoError(t, m.Write(&d))
		require.NotNil(t, d.Summary)
		w := written{count: d.GetSummary().GetSampleCount(), sum: d.GetSummary().GetSampleSum()}
		for _, l := range d.GetLabel() {
			w.labels = append(w.labels, [2]string{l.GetName(), l.GetValue()})
		}
		for _, q := range d.GetSummary().GetQuantile() {
			w.quantiles = append(w.quantiles, [2]float64{q.GetQuantile(), q.GetValue()})
		}
		return w
	}
	var win metrics.Latency
	for i := range win.Percentiles {
		win.Percentiles[i] = time.Duration(i+1) * 1337 * time.Microsecond
	}
	for _, detail := range []bool{false, true} {
		for _, calls := range []int64{0, 7} {
			for _, name := range []string{"get", `a"b\c`, "ünï€ 🚀", "nl\nnul\x00"} {
				win.Count = calls
				ch := make(chan prometheus.Metric, 2)
				o := out{ch: ch, dropped: new(atomic.Uint64), detail: detail}
				o.window(newCmdPairs("grp "+name, name), totalPair, win, 42, 1500*time.Millisecond)
				close(ch)
				var got prometheus.Metric
				for m := range ch {
					if m.Desc() == latencyDesc {
						got = m
					}
				}
				require.NotNil(t, got)
				qs := map[float64]float64{}
				for i, q := range quantiles {
					if calls > 0 && (detail || slices.Contains(leanQuantiles, i)) {
						qs[q] = win.Percentiles[i].Seconds()
					}
				}
				want, err := prometheus.NewConstSummary(latencyDesc, 42, 1.5, qs, "grp "+name, name, "total")
				require.NoError(t, err)
				assert.Equal(t, write(want), write(got), "detail %v, %d calls, %q", detail, calls, name)
				assert.Zero(t, o.dropped.Load())
			}
		}
	}
	o := out{ch: make(chan prometheus.Metric, 2), dropped: new(atomic.Uint64), detail: true}
	win.Count = 1
	o.window(newCmdPairs("ok", "bad\xff"), runPair, win, 1, time.Second)
	assert.Equal(t, uint64(2), o.dropped.Load(), "the mean and the summary dropped")
	assert.Empty(t, o.ch)
}

// TestPedanticRegistryGathers: a pedantic registry, which checks every
// series' labels against its description, gathers a service with every
// kind of series without an error, lean and in detail (the shared label
// pairs are the descriptions' labels, in their order).
func TestPedanticRegistryGathers(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithDetail()}} {
		c, err := New(service(t), opts...)
		require.NoError(t, err)
		pr := prometheus.NewPedanticRegistry()
		require.NoError(t, pr.Register(c))
		fams, err := pr.Gather()
		require.NoError(t, err)
		assert.NotEmpty(t, fams)
		i := slices.IndexFunc(fams, func(f *dto.MetricFamily) bool { return f.GetName() == "bulwark_collector_dropped_series_total" })
		require.GreaterOrEqual(t, i, 0)
		assert.Zero(t, fams[i].GetMetric()[0].GetCounter().GetValue())
	}
}
