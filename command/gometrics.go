package command

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	gometrics "github.com/rcrowley/go-metrics"

	"github.com/bulwark-go/bulwark/metrics"
)

// The go-metrics bridge: every group and command publishes functional
// gauges and read-only counters (see Registry.Metrics for the names) that
// read the executor's own counters when a reporter asks.

// metricName joins go-metrics name parts with dots, escaping each part so
// that its dots are not read as separators (see Registry.Metrics).
func metricName(parts ...string) string {
	for i, p := range parts {
		parts[i] = metricEscaper.Replace(p)
	}
	return strings.Join(parts, ".")
}

// MetricName joins go-metrics name parts with dots, escaping each part as
// Registry.Metrics does ("%" as "%25", "." as "%2E"), for an extension that
// publishes metrics beside the groups' (the write queue's queue.<group>.*).
func MetricName(parts ...string) string { return metricName(parts...) }

// metricEscaper escapes a part of a go-metrics name: "%" first, so that the
// escape of a dot cannot be confused with a name that spells it.
var metricEscaper = strings.NewReplacer("%", "%25", ".", "%2E")

func groupPrefix(g *Group) string { return metricName("group", g.name) }

func commandPrefix(c *commandState) string { return metricName("command", c.group.name, c.name) }

// groupMetrics returns the group's metrics besides its window's, by name.
func groupMetrics(g *Group) map[string]any {
	p := groupPrefix(g)
	stats := g.sem.Stats
	if g.pool != nil {
		stats = g.pool.Stats
	}
	return map[string]any{
		p + ".bulkhead.active":    gometrics.NewFunctionalGauge(func() int64 { return int64(stats().Active) }),
		p + ".bulkhead.queued":    gometrics.NewFunctionalGauge(func() int64 { return int64(stats().Queued) }),
		p + ".bulkhead.detached":  gometrics.NewFunctionalGauge(func() int64 { return int64(stats().Detached) }),
		p + ".bulkhead.capacity":  gometrics.NewFunctionalGauge(func() int64 { return int64(stats().Capacity) }),
		p + ".bulkhead.completed": counterFunc(func() int64 { return stats().Completed }),
		p + ".bulkhead.rejected":  counterFunc(func() int64 { return stats().Rejected }),
		p + ".circuit.state":      gometrics.NewFunctionalGauge(func() int64 { return int64(g.breaker.State()) }),
		p + ".config.generation":  counterFunc(func() int64 { return int64(g.cfg().generation) }),
	}
}

// commandMetrics returns the command's metrics besides its window's, by name.
func commandMetrics(c *commandState) map[string]any {
	p := commandPrefix(c)
	return map[string]any{
		p + ".inflight":      gometrics.NewFunctionalGauge(c.hot.inFlight.Load),
		p + ".circuit.state": gometrics.NewFunctionalGauge(func() int64 { return int64(c.breaker.State()) }),
		p + ".calls":         counterFunc(func() int64 { return Calls(c.metrics.Cumulative()) }),
		p + ".degraded":      counterFunc(func() int64 { return c.metrics.Cumulative()[metrics.FallbackSuccess] }),
	}
}

func (r *Registry) exportGroup(g *Group) error {
	p := groupPrefix(g)
	if err := registerWindow(r.gm, p, false, func() metrics.Snapshot { return g.window(g.clock.Now()) }); err != nil {
		return err
	}
	if err := registerAll(r.gm, groupMetrics(g)); err != nil {
		unregisterWindow(r.gm, p)
		return err
	}
	return nil
}

func (r *Registry) exportCommand(c *commandState) error {
	p := commandPrefix(c)
	if err := registerWindow(r.gm, p, true, func() metrics.Snapshot { return c.metrics.Snapshot(c.group.clock.Now()) }); err != nil {
		return err
	}
	if err := registerAll(r.gm, commandMetrics(c)); err != nil {
		unregisterWindow(r.gm, p)
		return err
	}
	return nil
}

// registerAll registers every metric of ms, or none: on a clash it removes
// those it added and returns the error.
func registerAll(reg gometrics.Registry, ms map[string]any) error {
	var done []string
	for _, name := range slices.Sorted(maps.Keys(ms)) {
		if err := reg.Register(name, ms[name]); err != nil {
			for _, n := range done {
				reg.Unregister(n)
			}
			return fmt.Errorf("command: register %s: %w", name, err)
		}
		done = append(done, name)
	}
	return nil
}

// unregisterGroup removes the go-metrics of g and of its commands cmds.
func unregisterGroup(reg gometrics.Registry, g *Group, cmds *commandTable) {
	unregisterWindow(reg, groupPrefix(g))
	for name := range groupMetrics(g) {
		reg.Unregister(name)
	}
	for _, c := range cmds.byName {
		unregisterWindow(reg, commandPrefix(c))
		for name := range commandMetrics(c) {
			reg.Unregister(name)
		}
	}
}

// counterFunc is a read-only go-metrics Counter over one of our counters.
// Like go-metrics' own snapshots, it panics when asked to change.
type counterFunc func() int64

func (f counterFunc) Count() int64                { return f() }
func (f counterFunc) Snapshot() gometrics.Counter { return gometrics.CounterSnapshot(f()) }
func (counterFunc) Clear()                        { panic("command: Clear called on a read-only counter") }
func (counterFunc) Inc(int64)                     { panic("command: Inc called on a read-only counter") }
func (counterFunc) Dec(int64)                     { panic("command: Dec called on a read-only counter") }

// registerWindow publishes the snapshots that snap returns into reg as
// go-metrics functional gauges named prefix + "." + a metric name:
//
//	rolling.<event>, cumulative.<event>   counts per event, lower case (rolling.short_circuited)
//	rolling.max                           rolling maximum
//	run_ns.<q>, total_ns.<q>              latency percentiles in ns (q: p0 p25 p50 p75 p90 p95 p99 p99_5 p100)
//	run_ns.mean, total_ns.mean, run_ns.count, total_ns.count
//
// Nothing is recorded through go-metrics: every gauge reads a snapshot of
// the ring, so go-metrics stays off the hot path and no Meter (whose ticker
// goroutine never exits) is created. A reporter reading all gauges once per
// cycle triggers one snapshot per cycle: the snapshot is reused until a
// gauge is read a second time. Without latency (a ring that records counts
// only) the latency gauges, which could only read 0, are left out. It fails
// if a name is already taken, and then registers nothing.
func registerWindow(reg gometrics.Registry, prefix string, latency bool, snap func() metrics.Snapshot) error {
	gauges := gaugeReaders(latency)
	c := &snapshotCache{snap: snap}
	for i, g := range gauges {
		read := g.read
		gauge := gometrics.NewFunctionalGauge(func() int64 { return read(c.get(i, len(gauges))) })
		if err := reg.Register(prefix+"."+g.name, gauge); err != nil {
			unregisterWindow(reg, prefix)
			return fmt.Errorf("command: register %s.%s: %w", prefix, g.name, err)
		}
	}
	return nil
}

// unregisterWindow removes every gauge that registerWindow published under
// prefix.
func unregisterWindow(reg gometrics.Registry, prefix string) {
	for _, g := range gaugeReaders(true) {
		reg.Unregister(prefix + "." + g.name)
	}
}

type gaugeReader struct {
	name string
	read func(metrics.Snapshot) int64
}

var quantileNames = [len(metrics.Latency{}.Percentiles)]string{"p0", "p25", "p50", "p75", "p90", "p95", "p99", "p99_5", "p100"}

func gaugeReaders(latency bool) []gaugeReader {
	var gs []gaugeReader
	for e := range metrics.NumEvents {
		name := e.Label()
		gs = append(gs,
			gaugeReader{"rolling." + name, func(s metrics.Snapshot) int64 { return s.Counts[e] }},
			gaugeReader{"cumulative." + name, func(s metrics.Snapshot) int64 { return s.Cumulative[e] }})
	}
	gs = append(gs, gaugeReader{"rolling.max", func(s metrics.Snapshot) int64 { return s.Max }})
	if !latency {
		return gs
	}
	for _, h := range []struct {
		name string
		lat  func(metrics.Snapshot) metrics.Latency
	}{{"run_ns", func(s metrics.Snapshot) metrics.Latency { return s.Run }}, {"total_ns", func(s metrics.Snapshot) metrics.Latency { return s.Total }}} {
		for qi, q := range quantileNames {
			gs = append(gs, gaugeReader{h.name + "." + q, func(s metrics.Snapshot) int64 { return int64(h.lat(s).Percentiles[qi]) }})
		}
		gs = append(gs,
			gaugeReader{h.name + ".mean", func(s metrics.Snapshot) int64 { return int64(h.lat(s).Mean) }},
			gaugeReader{h.name + ".count", func(s metrics.Snapshot) int64 { return h.lat(s).Count }})
	}
	return gs
}

// snapshotCache hands every gauge the same snapshot within one reporting
// cycle: a gauge read for the second time since the last refresh starts a
// new cycle.
type snapshotCache struct {
	mu    sync.Mutex
	snap  func() metrics.Snapshot
	cur   metrics.Snapshot
	seen  []bool
	valid bool
}

func (c *snapshotCache) get(i, n int) metrics.Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.valid || c.seen[i] {
		c.cur, c.valid = c.snap(), true
		c.seen = make([]bool, n)
	}
	c.seen[i] = true
	return c.cur
}
