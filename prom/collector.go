package prom

import (
	"cmp"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// ErrNilSource is the error of New given no source.
var ErrNilSource = errors.New("prom: nil source")

// Source is what the collector reads: *command.Registry satisfies it.
type Source interface {
	// Snapshot describes every group and command now; each
	// CommandSnapshot's Latencies (WithDetail) or TotalLatencies (the
	// lean default) gives its latencies since it was created.
	Snapshot() command.Snapshot
}

// Collector is a prometheus.Collector over a Source: each scrape takes one
// snapshot (and each command's cumulative latencies) and turns it into the metrics
// listed in the package doc. It is
// safe for concurrent use (concurrent scrapes take a snapshot each).
type Collector struct {
	src     Source
	detail  bool          // WithDetail
	dropped atomic.Uint64 // series left out of scrapes: see bulwark_collector_dropped_series_total
}

// Option is a setting of New.
type Option func(*Collector)

// WithDetail makes the collector export every series of the package doc
// for every command (more than three times the default set:
// TestCollectorIsLeanByDefault), where by default it exports
// the few an operator reads first (at most 15 per command; see Series per
// command in the package doc).
func WithDetail() Option { return func(c *Collector) { c.detail = true } }

// New returns a collector that reads src at every scrape. The error
// matches ErrNilSource when src is nil.
func New(src Source, opts ...Option) (*Collector, error) {
	if src == nil {
		return nil, ErrNilSource
	}
	c := &Collector{src: src}
	for _, o := range opts {
		o(c)
	}
	return c, nil
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
	latencyDesc    = desc("command_latency_window_seconds", "Latency quantiles over the command's rolling window (not cumulative; do not aggregate across instances); count and sum since the command was created.", "group", "command", "phase")
	latencyAvgDesc = desc("command_latency_window_mean_seconds", "Mean latency over the command's rolling window.", "group", "command", "phase")
	cmdStateDesc   = desc("command_circuit_state", "1 for the state the command's breaker is in, 0 for the others.", "group", "command", "state")
	cmdSinceDesc   = desc("command_circuit_state_seconds", "Time the command's breaker has been in its current state.", cmdLabels...)
	grpStateDesc   = desc("group_circuit_state", "1 for the state the group's breaker is in, 0 for the others.", "group", "state")
	grpSinceDesc   = desc("group_circuit_state_seconds", "Time the group's breaker has been in its current state.", "group")
	cmdModeDesc    = desc("command_circuit_mode", "1 for the mode the command's breaker is in (normal, forced-open, forced-closed, observe-only), 0 for the others.", "group", "command", "mode")
	grpModeDesc    = desc("group_circuit_mode", "1 for the mode the group's breaker is in, 0 for the others.", "group", "mode")
	cmdBoundDesc   = desc("command_circuit_error_bound", "Lower bound of the command's breaker's failure ratio at its confidence (circuit.Config.Confidence), what it trips on; no series with the rule off.", cmdLabels...)
	grpBoundDesc   = desc("group_circuit_error_bound", "Lower bound of the group's breaker's failure ratio at its confidence; no series with the rule off.", "group")
	cmdAlertDesc   = desc("command_alert_tier", "1, labelled with the alert tier the command's breaker has reached in its current outage; no series when none.", "group", "command", "tier")
	grpAlertDesc   = desc("group_alert_tier", "1, labelled with the alert tier the group's breaker has reached in its current outage; no series when none.", "group", "tier")
	alarmDesc      = desc("command_degraded_alarm", "1 while the command's degraded alarm is raised, else 0.", cmdLabels...)
	throttleDesc   = desc("group_throttle_probability", "Share of the group's calls its client-side throttle refuses now (command/throttle.Config); no series with the throttle off.", "group")
	adaptiveDesc   = desc("group_adaptive_limit", "The group's adaptive concurrency limit in force: its bulkhead's size (command/adaptive.Config); no series with the limit off.", "group")
	generationDesc = desc("group_config_generation", "Accepted Reconfigure calls of the group since it was created.", "group")
	activeDesc     = desc("bulkhead_active", "Bulkhead slots or permits taken.", "group")
	queuedDesc     = desc("bulkhead_queued", "Calls waiting in the bulkhead's queue.", "group")
	capacityDesc   = desc("bulkhead_capacity", "Calls the bulkhead lets run at once (pool size or semaphore limit).", "group")
	queueCapDesc   = desc("bulkhead_queue_capacity", "Calls the bulkhead's queue holds (0 for a semaphore).", "group")
	bhDetachedDesc = desc("bulkhead_detached", "Work still running in the bulkhead whose caller already left.", "group")
	rejectedDesc   = desc("bulkhead_rejected_total", "Calls the bulkhead refused because it was full.", "group")
	completedDesc  = desc("bulkhead_completed_total", "Work that returned from the bulkhead (or permits released).", "group")
	transitionDesc = desc("breaker_transitions_total", "Transitions of a breaker since it was created, by from state, to state and reason (command=\"\" for the group's breaker).", "group", "command", "from", "to", "reason")
	renamedDesc    = desc("group_renamed_commands", "Commands of the group named by the renamed form of their name (not valid UTF-8, or longer than command.MaxNameLength).", "group")
	droppedDesc    = desc("collector_dropped_series_total", "Series the collector left out of scrapes because they could not be built (a label value not valid UTF-8).")

	allDescs = []*prometheus.Desc{
		eventsDesc, callsDesc, inFlightDesc, detachedDesc, degradedDesc, histogramDesc, latencyDesc, latencyAvgDesc,
		cmdStateDesc, cmdSinceDesc, grpStateDesc, grpSinceDesc, cmdModeDesc, grpModeDesc, cmdBoundDesc, grpBoundDesc,
		transitionDesc, cmdAlertDesc, grpAlertDesc, alarmDesc, generationDesc, throttleDesc, adaptiveDesc,
		activeDesc, queuedDesc, capacityDesc, queueCapDesc, bhDetachedDesc, rejectedDesc, completedDesc,
		renamedDesc, droppedDesc,
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

// quantiles are metrics.Quantiles() as Prometheus quantiles (0 to 1).
var quantiles = func() (q [len(metrics.Latency{}.Percentiles)]float64) {
	for i, p := range metrics.Quantiles() {
		q[i] = p / 100
	}
	return q
}()

// leanQuantiles are the indexes in quantiles of those exported without
// WithDetail: the median and the 99th percentile.
var leanQuantiles = []int{slices.Index(quantiles[:], 0.5), slices.Index(quantiles[:], 0.99)}

// Describe sends the descriptions of every metric the collector exports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect takes one snapshot of the source and sends its metrics. A series
// it cannot build (a label value that is not valid UTF-8, from a Source
// other than a command.Registry, whose names are always valid) is left
// out and counted in bulwark_collector_dropped_series_total: one bad name
// never fails the whole scrape.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	o := out{ch: ch, dropped: &c.dropped, detail: c.detail}
	gs := c.src.Snapshot().Groups
	var cmds []groupCommand
	for i := range gs {
		o.group(gs[i])
		for j := range gs[i].Commands {
			cmds = append(cmds, groupCommand{gs[i].Name, &gs[i].Commands[j]})
		}
	}
	// Gather sorts each family's series by their label values, labels in
	// name order ("command" before "group"): sent in that order, most
	// families arrive sorted and Gather's sort (pdqsort) passes over them
	// with little work. Families with a label between the two ("event",
	// "state") arrive sorted only while no command name repeats across
	// groups; the output is the same either way.
	slices.SortFunc(cmds, func(a, b groupCommand) int {
		return cmp.Or(strings.Compare(a.c.Name, b.c.Name), strings.Compare(a.group, b.group))
	})
	for _, gc := range cmds {
		o.command(gc.group, gc.c)
	}
	ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(c.dropped.Load()))
}

// groupCommand is a command's snapshot with the name of its group.
type groupCommand struct {
	group string
	c     *command.CommandSnapshot
}

// out sends one scrape's metrics, leaving out and counting in dropped those
// that cannot be built.
type out struct {
	ch      chan<- prometheus.Metric
	dropped *atomic.Uint64
	detail  bool // every series, not only the lean set (WithDetail)
}

// send sends m, or counts err.
func (o out) send(m prometheus.Metric, err error) {
	if err != nil {
		o.dropped.Add(1)
		return
	}
	o.ch <- m
}

func (o out) gauge(d *prometheus.Desc, v float64, labels ...string) {
	o.send(prometheus.NewConstMetric(d, prometheus.GaugeValue, v, labels...))
}

func (o out) counter(d *prometheus.Desc, v float64, labels ...string) {
	o.send(prometheus.NewConstMetric(d, prometheus.CounterValue, v, labels...))
}

// histogram sends d as a histogram with the given labels (group, command,
// phase); nothing for a nil d (a ring without latency).
func (o out) histogram(d *metrics.Distribution, labels ...string) {
	if d == nil {
		return
	}
	counts, err := d.CountsAtOrBelow(buckets)
	if err != nil {
		o.ch <- prometheus.NewInvalidMetric(histogramDesc, err)
		return
	}
	bs := make(map[float64]uint64, len(buckets))
	for i, b := range buckets {
		bs[b.Seconds()] = uint64(counts[i])
	}
	o.send(prometheus.NewConstHistogram(histogramDesc, uint64(d.Count()), d.Sum().Seconds(), bs, labels...))
}

func (o out) group(g command.GroupSnapshot) {
	b := g.Bulkhead
	o.gauge(activeDesc, float64(b.Active), g.Name)
	o.gauge(queuedDesc, float64(b.Queued), g.Name)
	o.gauge(capacityDesc, float64(b.Capacity), g.Name)
	o.gauge(queueCapDesc, float64(b.QueueCapacity), g.Name)
	o.gauge(bhDetachedDesc, float64(b.Detached), g.Name)
	o.counter(rejectedDesc, float64(b.Rejected), g.Name)
	o.counter(completedDesc, float64(b.Completed), g.Name)
	o.gauge(generationDesc, float64(g.ConfigGeneration), g.Name)
	if g.Throttle.K > 0 {
		o.gauge(throttleDesc, g.Throttle.Probability, g.Name)
	}
	if g.Adaptive.Limit > 0 {
		o.gauge(adaptiveDesc, float64(g.Adaptive.Limit), g.Name)
	}
	o.gauge(renamedDesc, float64(g.RenamedCommands), g.Name)
	o.breaker(breakerDescs{grpStateDesc, grpSinceDesc, grpModeDesc, grpBoundDesc}, g.Breaker, g.Name)
	o.transitions(g.Breaker, g.Name, "")
	o.tier(grpAlertDesc, g.AlertTier, g.Name)
}

// command sends the metrics of command c of the group called group, with
// its latencies since it was created (none when the source has none).
func (o out) command(group string, c *command.CommandSnapshot) {
	m := c.Metrics
	p := newCmdPairs(group, c.Name)
	if o.detail {
		run, total := c.Latencies()
		o.histogram(run, group, c.Name, "run")
		o.histogram(total, group, c.Name, "total")
		if run != nil {
			o.window(p, runPair, m.Run, run.Count(), run.Sum())
			o.window(p, totalPair, m.Total, total.Count(), total.Sum())
		}
	} else if n, sum, ok := c.TotalLatencies(); ok { // the lean summary needs no bins
		o.window(p, totalPair, m.Total, n, sum)
	}
	for e := range metrics.NumEvents {
		if n := m.Cumulative[e]; n > 0 || o.detail {
			o.shared(eventsDesc, true, float64(n), p.with(eventPairs[e], true))
		}
	}
	o.shared(callsDesc, true, float64(m.Cumulative.Calls()), p)
	o.shared(inFlightDesc, false, float64(c.InFlight), p)
	o.shared(alarmDesc, false, oneIf(c.DegradedAlarm), p)
	o.tier(cmdAlertDesc, c.AlertTier, group, c.Name)
	o.transitions(c.Breaker, group, c.Name)
	if !o.detail {
		for i, s := range states {
			o.shared(cmdStateDesc, false, oneIf(c.Breaker.State == s), p.with(statePairs[i], false))
		}
		if c.Breaker.Config.Confidence > 0 {
			o.shared(cmdBoundDesc, false, c.Breaker.Health.ErrorBound, p)
		}
		return
	}
	o.gauge(detachedDesc, float64(c.Detached), group, c.Name)
	o.gauge(degradedDesc, c.Metrics.Counts.DegradedRate(), group, c.Name)
	o.breaker(breakerDescs{cmdStateDesc, cmdSinceDesc, cmdModeDesc, cmdBoundDesc}, c.Breaker, group, c.Name)
}

// window sends the latency summary of one phase (the pair phase) of the
// command with pairs p: the quantiles of its window win (none when the
// window has no call; the median and the 99th percentile only without
// WithDetail), with count and sum, those of every latency since the
// command was created; and, with WithDetail, the window's mean.
func (o out) window(p cmdPairs, phase *dto.LabelPair, win metrics.Latency, count int64, sum time.Duration) {
	if o.detail && win.Count > 0 {
		o.shared(latencyAvgDesc, false, win.Mean.Seconds(), p.with(phase, false))
	}
	if p == nil {
		o.dropped.Add(1)
		return
	}
	s := &dto.Summary{SampleCount: new(uint64(count)), SampleSum: new(sum.Seconds())}
	if win.Count > 0 {
		for i := range quantiles {
			if o.detail || slices.Contains(leanQuantiles, i) {
				s.Quantile = append(s.Quantile, &dto.Quantile{Quantile: &quantiles[i], Value: new(win.Percentiles[i].Seconds())})
			}
		}
	}
	o.ch <- &sharedMetric{desc: latencyDesc, labels: p.with(phase, false), summary: s}
}

// breakerDescs are the descriptions of a breaker's metrics, the group's or
// a command's.
type breakerDescs struct{ state, since, mode, bound *prometheus.Desc }

// breaker sends b's state (one series per state), time in state, mode
// (one series per mode) and, with the confidence rule on, the failure
// ratio's lower bound, labelled with labels (group, or group and command).
func (o out) breaker(d breakerDescs, b circuit.Snapshot, labels ...string) {
	for _, s := range states {
		o.gauge(d.state, oneIf(b.State == s), append(labels, s.String())...)
	}
	o.gauge(d.since, b.Since.Seconds(), labels...)
	for _, m := range modes {
		o.gauge(d.mode, oneIf(b.Mode == m), append(labels, m.String())...)
	}
	if b.Config.Confidence > 0 {
		o.gauge(d.bound, b.Health.ErrorBound, labels...)
	}
}

// transitions sends b's transition counts, one series per kind that has
// happened (a breaker that never moved has none), labelled with group and
// command ("" for a group's breaker).
func (o out) transitions(b circuit.Snapshot, group, cmd string) {
	for _, t := range b.TransitionCounts {
		o.counter(transitionDesc, float64(t.N), group, cmd, t.From.String(), t.To.String(), string(t.Reason))
	}
}

// tier sends 1 labelled with tier (after labels), or nothing when tier is
// "" (no tier reached, or alerts off): the tier names are the group's
// alert.Config.Tiers, a handful, so the series stay few.
func (o out) tier(d *prometheus.Desc, tier string, labels ...string) {
	if tier == "" {
		return
	}
	o.gauge(d, 1, append(labels, tier)...)
}

// The label names of a command's series, and the pairs of the label
// values that are the same for every command, built once.
var (
	commandLabel, groupLabel, eventLabel, stateLabel, phaseLabel = "command", "group", "event", "state", "phase"

	runPair   = &dto.LabelPair{Name: &phaseLabel, Value: new("run")}
	totalPair = &dto.LabelPair{Name: &phaseLabel, Value: new("total")}

	eventPairs = func() (ps [metrics.NumEvents]*dto.LabelPair) {
		for e := range metrics.NumEvents {
			ps[e] = &dto.LabelPair{Name: &eventLabel, Value: new(e.Label())}
		}
		return ps
	}()
	statePairs = func() (ps [len(states)]*dto.LabelPair) {
		for i, s := range states {
			ps[i] = &dto.LabelPair{Name: &stateLabel, Value: new(s.String())}
		}
		return ps
	}()
)

// cmdPairs are the command and group label pairs of one command's series,
// in name order as Gather wants them, built once per command and scrape
// and shared by its series (prometheus.NewConstMetric builds three
// allocations per label for every series); nil when a name is not valid
// UTF-8 (a Source other than a command.Registry), which drops the series.
type cmdPairs []*dto.LabelPair

func newCmdPairs(group, cmd string) cmdPairs {
	if !utf8.ValidString(group) || !utf8.ValidString(cmd) {
		return nil
	}
	return cmdPairs{{Name: &commandLabel, Value: &cmd}, {Name: &groupLabel, Value: &group}}
}

// with returns p with the pair x, placed between command and group if
// between (a label named before "group", as "event"), else after them.
func (p cmdPairs) with(x *dto.LabelPair, between bool) cmdPairs {
	if p == nil {
		return nil
	}
	if between {
		return cmdPairs{p[0], x, p[1]}
	}
	return cmdPairs{p[0], p[1], x}
}

// shared sends a counter (or gauge) of value v labelled with p, or counts
// it dropped when p is nil.
func (o out) shared(d *prometheus.Desc, counter bool, v float64, p cmdPairs) {
	if p == nil {
		o.dropped.Add(1)
		return
	}
	o.ch <- &sharedMetric{desc: d, counter: counter, v: v, labels: p}
}

// sharedMetric is a counter, gauge (v) or summary whose label pairs other
// series share.
type sharedMetric struct {
	desc    *prometheus.Desc
	counter bool
	v       float64
	summary *dto.Summary // a summary when not nil
	labels  cmdPairs
}

// Desc implements prometheus.Metric.
func (m *sharedMetric) Desc() *prometheus.Desc { return m.desc }

// Write implements prometheus.Metric.
func (m *sharedMetric) Write(out *dto.Metric) error {
	out.Label = m.labels
	switch {
	case m.summary != nil:
		out.Summary = m.summary
	case m.counter:
		out.Counter = &dto.Counter{Value: &m.v}
	default:
		out.Gauge = &dto.Gauge{Value: &m.v}
	}
	return nil
}

// oneIf returns 1 if b, else 0.
func oneIf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
