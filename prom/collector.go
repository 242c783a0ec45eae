package prom

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// ErrNilSource is the error of New given no source.
var ErrNilSource = errors.New("prom: nil source")

// Source is what the collector reads: *command.Registry satisfies it.
type Source interface {
	// Snapshot describes every group and command now.
	Snapshot() command.Snapshot
	// CumulativeLatencies returns every command's latency distributions
	// since it was created.
	CumulativeLatencies() []command.CommandLatency
}

// Collector is a prometheus.Collector over a Source: each scrape takes one
// snapshot (and the cumulative latencies) and turns it into the metrics
// listed in the package doc. It is
// safe for concurrent use (concurrent scrapes take a snapshot each).
type Collector struct {
	src Source
}

// New returns a collector that reads src at every scrape. The error
// matches ErrNilSource when src is nil.
func New(src Source) (*Collector, error) {
	if src == nil {
		return nil, ErrNilSource
	}
	return &Collector{src: src}, nil
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("bulwark_"+name, help, labels, nil)
}

// The descriptions of every metric the collector exports.
var (
	cmdLabels = []string{"group", "command"}

	eventsDesc     = desc("command_events_total", "Events counted since the command was created, by kind (outcomes, fallback outcomes, slow calls, ...).", "group", "command", "event")
	callsDesc      = desc("command_calls_total", "Callers' calls since the command was created: attempts (one primary outcome each) less retried ones.", cmdLabels...)
	inFlightDesc   = desc("command_in_flight", "Calls of the command executing now.", cmdLabels...)
	detachedDesc   = desc("command_detached", "Calls of the command that timed out while their Run still runs in the pool.", cmdLabels...)
	degradedDesc   = desc("command_degraded_ratio", "Share of the rolling window's calls answered with a fallback value.", cmdLabels...)
	histogramDesc  = desc("command_latency_seconds", "Latency of the command's calls since it was created (phase run: Run alone; total: what the caller waited).", "group", "command", "phase")
	latencyDesc    = desc("command_latency_window_seconds", "Latency quantile over the command's rolling window (not cumulative; do not aggregate across instances).", "group", "command", "phase", "quantile")
	latencyAvgDesc = desc("command_latency_window_mean_seconds", "Mean latency over the command's rolling window.", "group", "command", "phase")
	cmdStateDesc   = desc("command_circuit_state", "1 for the state the command's breaker is in, 0 for the others.", "group", "command", "state")
	cmdSinceDesc   = desc("command_circuit_state_seconds", "Time the command's breaker has been in its current state.", cmdLabels...)
	grpStateDesc   = desc("group_circuit_state", "1 for the state the group's breaker is in, 0 for the others.", "group", "state")
	grpSinceDesc   = desc("group_circuit_state_seconds", "Time the group's breaker has been in its current state.", "group")
	cmdModeDesc    = desc("command_circuit_mode", "1 for the mode the command's breaker is in (normal, forced-open, forced-closed, observe-only), 0 for the others.", "group", "command", "mode")
	grpModeDesc    = desc("group_circuit_mode", "1 for the mode the group's breaker is in, 0 for the others.", "group", "mode")
	cmdAlertDesc   = desc("command_alert_tier", "1, labelled with the alert tier the command's breaker has reached in its current outage; no series when none.", "group", "command", "tier")
	grpAlertDesc   = desc("group_alert_tier", "1, labelled with the alert tier the group's breaker has reached in its current outage; no series when none.", "group", "tier")
	alarmDesc      = desc("command_degraded_alarm", "1 while the command's degraded alarm is raised, else 0.", cmdLabels...)
	generationDesc = desc("group_config_generation", "Accepted Reconfigure calls of the group since it was created.", "group")
	activeDesc     = desc("bulkhead_active", "Bulkhead slots or permits taken.", "group")
	queuedDesc     = desc("bulkhead_queued", "Calls waiting in the bulkhead's queue.", "group")
	capacityDesc   = desc("bulkhead_capacity", "Calls the bulkhead lets run at once (pool size or semaphore limit).", "group")
	queueCapDesc   = desc("bulkhead_queue_capacity", "Calls the bulkhead's queue holds (0 for a semaphore).", "group")
	bhDetachedDesc = desc("bulkhead_detached", "Work still running in the bulkhead whose caller already left.", "group")
	rejectedDesc   = desc("bulkhead_rejected_total", "Calls the bulkhead refused because it was full.", "group")
	completedDesc  = desc("bulkhead_completed_total", "Work that returned from the bulkhead (or permits released).", "group")

	allDescs = []*prometheus.Desc{
		eventsDesc, callsDesc, inFlightDesc, detachedDesc, degradedDesc, histogramDesc, latencyDesc, latencyAvgDesc,
		cmdStateDesc, cmdSinceDesc, grpStateDesc, grpSinceDesc, cmdModeDesc, grpModeDesc,
		cmdAlertDesc, grpAlertDesc, alarmDesc, generationDesc,
		activeDesc, queuedDesc, capacityDesc, queueCapDesc, bhDetachedDesc, rejectedDesc, completedDesc,
	}
)

// buckets are the upper bounds of the latency histogram's buckets, from
// 1 ms to 10 s (client_golang's DefBuckets with 1 ms and 2.5 ms added for
// fast dependencies); latencies above fall in +Inf.
var buckets = []time.Duration{
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// states are the breaker states, each exported as a state label value.
var states = [...]circuit.State{circuit.Closed, circuit.Open, circuit.HalfOpen}

// modes are the breaker modes, each exported as a mode label value.
var modes = [...]circuit.Mode{circuit.Normal, circuit.ForcedOpen, circuit.ForcedClosed, circuit.ObserveOnly}

// quantileLabels are metrics.Quantiles() as Prometheus quantile values.
var quantileLabels = func() (q [len(metrics.Latency{}.Percentiles)]string) {
	for i, p := range metrics.Quantiles() {
		q[i] = strconv.FormatFloat(p/100, 'g', -1, 64)
	}
	return q
}()

// Describe sends the descriptions of every metric the collector exports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect takes one snapshot of the source and sends its metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, g := range c.src.Snapshot().Groups {
		collectGroup(ch, g)
		for _, cmd := range g.Commands {
			collectCommand(ch, cmd)
		}
	}
	for _, l := range c.src.CumulativeLatencies() {
		collectHistogram(ch, l.Run, l.Group, l.Command, "run")
		collectHistogram(ch, l.Total, l.Group, l.Command, "total")
	}
}

// collectHistogram sends d as a histogram with the given labels (group,
// command, phase); nothing for a nil d (a ring without latency).
func collectHistogram(ch chan<- prometheus.Metric, d *metrics.Distribution, labels ...string) {
	if d == nil {
		return
	}
	counts, err := d.CountsAtOrBelow(buckets)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(histogramDesc, err)
		return
	}
	bs := make(map[float64]uint64, len(buckets))
	for i, b := range buckets {
		bs[b.Seconds()] = uint64(counts[i])
	}
	ch <- prometheus.MustNewConstHistogram(histogramDesc, uint64(d.Count()), d.Sum().Seconds(), bs, labels...)
}

func collectGroup(ch chan<- prometheus.Metric, g command.GroupSnapshot) {
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, g.Name)
	}
	b := g.Bulkhead
	gauge(activeDesc, float64(b.Active))
	gauge(queuedDesc, float64(b.Queued))
	gauge(capacityDesc, float64(b.Capacity))
	gauge(queueCapDesc, float64(b.QueueCapacity))
	gauge(bhDetachedDesc, float64(b.Detached))
	ch <- prometheus.MustNewConstMetric(rejectedDesc, prometheus.CounterValue, float64(b.Rejected), g.Name)
	ch <- prometheus.MustNewConstMetric(completedDesc, prometheus.CounterValue, float64(b.Completed), g.Name)
	gauge(generationDesc, float64(g.ConfigGeneration))
	collectBreaker(ch, breakerDescs{grpStateDesc, grpSinceDesc, grpModeDesc}, g.Breaker, g.Name)
	collectTier(ch, grpAlertDesc, g.AlertTier, g.Name)
}

func collectCommand(ch chan<- prometheus.Metric, c command.CommandSnapshot) {
	gauge := func(d *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{c.Group, c.Name}, extra...)...)
	}
	m := c.Metrics
	for e := range metrics.NumEvents {
		ch <- prometheus.MustNewConstMetric(eventsDesc, prometheus.CounterValue, float64(m.Cumulative[e]), c.Group, c.Name, strings.ToLower(e.String()))
	}
	ch <- prometheus.MustNewConstMetric(callsDesc, prometheus.CounterValue, float64(command.Calls(m.Cumulative)), c.Group, c.Name)
	gauge(inFlightDesc, float64(c.InFlight))
	gauge(detachedDesc, float64(c.Detached))
	gauge(degradedDesc, c.DegradedRate)
	gauge(alarmDesc, oneIf(c.DegradedAlarm))
	for _, l := range []struct {
		phase string
		lat   metrics.Latency
	}{{"run", m.Run}, {"total", m.Total}} {
		if l.lat.Count == 0 {
			continue
		}
		for i, q := range quantileLabels {
			gauge(latencyDesc, l.lat.Percentiles[i].Seconds(), l.phase, q)
		}
		gauge(latencyAvgDesc, l.lat.Mean.Seconds(), l.phase)
	}
	collectBreaker(ch, breakerDescs{cmdStateDesc, cmdSinceDesc, cmdModeDesc}, c.Breaker, c.Group, c.Name)
	collectTier(ch, cmdAlertDesc, c.AlertTier, c.Group, c.Name)
}

// breakerDescs are the descriptions of a breaker's metrics, the group's or
// a command's.
type breakerDescs struct{ state, since, mode *prometheus.Desc }

// collectBreaker sends b's state (one series per state), time in state and
// mode (one series per mode), labelled with labels (group, or group and
// command).
func collectBreaker(ch chan<- prometheus.Metric, d breakerDescs, b circuit.Snapshot, labels ...string) {
	for _, s := range states {
		ch <- prometheus.MustNewConstMetric(d.state, prometheus.GaugeValue, oneIf(b.State == s), append(labels, s.String())...)
	}
	ch <- prometheus.MustNewConstMetric(d.since, prometheus.GaugeValue, b.Since.Seconds(), labels...)
	for _, m := range modes {
		ch <- prometheus.MustNewConstMetric(d.mode, prometheus.GaugeValue, oneIf(b.Mode == m), append(labels, m.String())...)
	}
}

// collectTier sends 1 labelled with tier (after labels), or nothing when
// tier is "" (no tier reached, or alerts off): the tier names are the
// group's AlertConfig.Tiers, a handful, so the series stay few.
func collectTier(ch chan<- prometheus.Metric, d *prometheus.Desc, tier string, labels ...string) {
	if tier == "" {
		return
	}
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, 1, append(labels, tier)...)
}

// oneIf returns 1 if b, else 0.
func oneIf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
