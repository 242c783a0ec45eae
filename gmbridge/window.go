package gmbridge

import (
	"sync"

	gometrics "github.com/rcrowley/go-metrics"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// windowMetrics returns the gauges, named prefix + "." + a metric name,
// of a window that win finds in the group's snapshot from c:
//
//	rolling.<event>, cumulative.<event>   counts per event, lower case (rolling.short_circuited)
//	rolling.max                           rolling maximum
//	run_ns.<q>, total_ns.<q>              latency percentiles in ns (q: p0 p25 p50 p75 p90 p95 p99 p99_5 p100)
//	run_ns.mean, total_ns.mean, run_ns.count, total_ns.count
//
// Without latency (a group's window, which records counts only) the
// latency gauges, which could only read 0, are left out.
func windowMetrics(prefix string, latency bool, c *snapshotCache, win func(*command.GroupSnapshot) metrics.Snapshot) map[string]any {
	ms := map[string]any{}
	for _, r := range gaugeReaders(latency) {
		g := c.gauge()
		ms[prefix+"."+r.name] = gometrics.NewFunctionalGauge(func() int64 { return r.read(win(c.get(g))) })
	}
	return ms
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

// snapshotCache hands every gauge of a group (its commands' included) the
// same snapshot within one reporting cycle: a gauge read for the second
// time since the last refresh starts a new cycle.
type snapshotCache struct {
	mu    sync.Mutex
	snap  func() command.GroupSnapshot
	cur   *command.GroupSnapshot // nil until the first read
	cycle uint64                 // counts the refreshes
	read  []uint64               // by gauge: the cycle of its last read, plus one (0: never read)
}

// gauge returns the index of a new gauge of the cache.
func (c *snapshotCache) gauge() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read = append(c.read, 0)
	return len(c.read) - 1
}

// get returns the snapshot of this cycle for gauge i.
func (c *snapshotCache) get(i int) *command.GroupSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil || c.read[i] == c.cycle+1 {
		s := c.snap()
		c.cur = &s
		c.cycle++
	}
	c.read[i] = c.cycle + 1
	return c.cur
}
