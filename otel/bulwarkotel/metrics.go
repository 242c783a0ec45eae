package bulwarkotel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// Metrics reports a registry's groups and commands to an OpenTelemetry
// meter: observable instruments that read one registry snapshot per
// collection, so that nothing is added to the call path (breaker
// transitions too: circuit.Snapshot.TransitionCounts counts every one since
// the breaker was created). The package doc lists the instruments. It is
// safe for concurrent use.
type Metrics struct {
	reg  *command.Registry
	inst instruments
	cb   metric.Registration
}

// instruments are the observable instruments of Metrics.
type instruments struct {
	events, calls, rejected, completed                  metric.Int64ObservableCounter
	cmdTransitions, grpTransitions                      metric.Int64ObservableCounter
	inFlight, detached                                  metric.Int64ObservableUpDownCounter
	active, queued, capacity, queueCapacity, bhDetached metric.Int64ObservableUpDownCounter
	cmdState, grpState, cmdMode, grpMode                metric.Int64ObservableGauge
	degraded                                            metric.Float64ObservableGauge
}

// NewMetrics registers the instruments of reg's metrics with cfg's meter
// provider, observed at every collection until Close. The error matches
// ErrNilRegistry when reg is nil, or is the meter's.
func NewMetrics(reg *command.Registry, cfg Config) (*Metrics, error) {
	if reg == nil {
		return nil, ErrNilRegistry
	}
	m := &Metrics{reg: reg}
	meter := cfg.meter()
	var errs []error
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, err := meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	upDown := func(name, unit, desc string) metric.Int64ObservableUpDownCounter {
		c, err := meter.Int64ObservableUpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	gauge := func(name, desc string) metric.Int64ObservableGauge {
		g, err := meter.Int64ObservableGauge(name, metric.WithUnit("1"), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	i := &m.inst
	i.events = counter("bulwark.command.events", "{event}", "Events counted since the command was created, by kind (bulwark.event).")
	i.calls = counter("bulwark.command.calls", "{call}", "Callers' calls since the command was created: attempts less retried ones.")
	i.rejected = counter("bulwark.bulkhead.rejected", "{call}", "Calls the group's bulkhead refused because it was full.")
	i.completed = counter("bulwark.bulkhead.completed", "{call}", "Work that returned from the group's bulkhead.")
	i.cmdTransitions = counter("bulwark.command.circuit.transitions", "{transition}", "Transitions of the command's breaker, by from, to and reason.")
	i.grpTransitions = counter("bulwark.group.circuit.transitions", "{transition}", "Transitions of the group's breaker, by from, to and reason.")
	i.inFlight = upDown("bulwark.command.in_flight", "{call}", "Calls of the command executing now.")
	i.detached = upDown("bulwark.command.detached", "{call}", "Calls of the command that timed out while their Run still runs in the pool.")
	i.active = upDown("bulwark.bulkhead.active", "{call}", "Bulkhead slots or permits taken.")
	i.queued = upDown("bulwark.bulkhead.queued", "{call}", "Calls waiting in the bulkhead's queue.")
	i.capacity = upDown("bulwark.bulkhead.capacity", "{call}", "Calls the bulkhead lets run at once (pool size or semaphore limit).")
	i.queueCapacity = upDown("bulwark.bulkhead.queue.capacity", "{call}", "Calls the bulkhead's queue holds (0 for a semaphore).")
	i.bhDetached = upDown("bulwark.bulkhead.detached", "{call}", "Work still running in the bulkhead whose caller already left.")
	i.cmdState = gauge("bulwark.command.circuit.state", "1 for the state the command's breaker is in (bulwark.circuit.state), 0 for the others.")
	i.grpState = gauge("bulwark.group.circuit.state", "1 for the state the group's breaker is in (bulwark.circuit.state), 0 for the others.")
	i.cmdMode = gauge("bulwark.command.circuit.mode", "1 for the mode the command's breaker is in (bulwark.circuit.mode), 0 for the others.")
	i.grpMode = gauge("bulwark.group.circuit.mode", "1 for the mode the group's breaker is in (bulwark.circuit.mode), 0 for the others.")
	d, err := meter.Float64ObservableGauge("bulwark.command.degraded.ratio", metric.WithUnit("1"),
		metric.WithDescription("Share of the command's rolling window's calls answered with a fallback value."))
	i.degraded = d
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cb, err := meter.RegisterCallback(m.observe,
		i.events, i.calls, i.rejected, i.completed, i.cmdTransitions, i.grpTransitions,
		i.inFlight, i.detached, i.active, i.queued, i.capacity, i.queueCapacity, i.bhDetached,
		i.cmdState, i.grpState, i.cmdMode, i.grpMode, i.degraded)
	if err != nil {
		return nil, err
	}
	m.cb = cb
	return m, nil
}

// Close unregisters the instruments' callback: later collections report
// nothing of the registry. Close is idempotent.
func (m *Metrics) Close() error { return m.cb.Unregister() }

// states are the breaker states, each reported as a bulwark.circuit.state value.
var states = [...]circuit.State{circuit.Closed, circuit.Open, circuit.HalfOpen}

// modes are the breaker modes, each reported as a bulwark.circuit.mode value.
var modes = [...]circuit.Mode{circuit.Normal, circuit.ForcedOpen, circuit.ForcedClosed, circuit.ObserveOnly}

// observe is the instruments' callback: it takes one snapshot of the
// registry and observes every instrument from it.
func (m *Metrics) observe(_ context.Context, o metric.Observer) error {
	for _, g := range m.reg.Snapshot().Groups {
		gattr := KeyGroup.String(g.Name)
		m.observeGroup(o, g, gattr)
		observeTransitions(o, m.inst.grpTransitions, g.Breaker, []attribute.KeyValue{gattr})
		for _, c := range g.Commands {
			observeTransitions(o, m.inst.cmdTransitions, c.Breaker, cmdAttrs(g.Name, c.Name))
		}
	}
	return nil
}

// observeTransitions observes b's transition counts into inst, one series
// per kind (from, to, reason) the breaker has made, with attributes base.
func observeTransitions(o metric.Observer, inst metric.Int64ObservableCounter, b circuit.Snapshot, base []attribute.KeyValue) {
	for _, t := range b.TransitionCounts {
		o.ObserveInt64(inst, int64(t.N), with(base,
			KeyFrom.String(t.From.String()), KeyTo.String(t.To.String()), KeyReason.String(string(t.Reason))))
	}
}

// cmdAttrs returns the group and command attributes of a command's series.
func cmdAttrs(group, cmd string) []attribute.KeyValue {
	return []attribute.KeyValue{KeyGroup.String(group), KeyCommand.String(cmd)}
}

// with returns o's attribute set: base and more.
func with(base []attribute.KeyValue, more ...attribute.KeyValue) metric.ObserveOption {
	return metric.WithAttributeSet(attribute.NewSet(append(append(make([]attribute.KeyValue, 0, len(base)+len(more)), base...), more...)...))
}

// observeGroup observes the series of group g and its commands.
func (m *Metrics) observeGroup(o metric.Observer, g command.GroupSnapshot, gattr attribute.KeyValue) {
	i := &m.inst
	ga := []attribute.KeyValue{gattr}
	gs := with(ga)
	b := g.Bulkhead
	o.ObserveInt64(i.active, int64(b.Active), gs)
	o.ObserveInt64(i.queued, int64(b.Queued), gs)
	o.ObserveInt64(i.capacity, int64(b.Capacity), gs)
	o.ObserveInt64(i.queueCapacity, int64(b.QueueCapacity), gs)
	o.ObserveInt64(i.bhDetached, int64(b.Detached), gs)
	o.ObserveInt64(i.rejected, int64(b.Rejected), gs)
	o.ObserveInt64(i.completed, int64(b.Completed), gs)
	observeBreaker(o, i.grpState, i.grpMode, g.Breaker, ga)
	for _, c := range g.Commands {
		ca := cmdAttrs(g.Name, c.Name)
		cs := with(ca)
		for e := range metrics.NumEvents {
			o.ObserveInt64(i.events, c.Metrics.Cumulative[e], with(ca, KeyEvent.String(e.Label())))
		}
		o.ObserveInt64(i.calls, c.Metrics.Cumulative.Calls(), cs)
		o.ObserveInt64(i.inFlight, c.InFlight, cs)
		o.ObserveInt64(i.detached, c.Detached, cs)
		o.ObserveFloat64(i.degraded, c.Metrics.Counts.DegradedRate(), cs)
		observeBreaker(o, i.cmdState, i.cmdMode, c.Breaker, ca)
	}
}

// observeBreaker observes breaker snapshot b's state and mode, one series
// per state and per mode (1 for b's, 0 for the others), with attributes
// base.
func observeBreaker(o metric.Observer, state, mode metric.Int64ObservableGauge, b circuit.Snapshot, base []attribute.KeyValue) {
	for _, s := range states {
		o.ObserveInt64(state, oneIf(b.State == s), with(base, KeyState.String(s.String())))
	}
	for _, md := range modes {
		o.ObserveInt64(mode, oneIf(b.Mode == md), with(base, KeyMode.String(md.String())))
	}
}

// oneIf returns 1 if b, else 0.
func oneIf(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
