package metrics

import (
	"fmt"
	"strings"
	"sync"

	gometrics "github.com/rcrowley/go-metrics"
)

// Register publishes the snapshots that snap returns into reg as go-metrics
// functional gauges named prefix + "." + a metric name:
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
// gauge is read a second time. Register fails if a name is already taken.
func Register(reg gometrics.Registry, prefix string, snap func() Snapshot) error {
	return register(reg, prefix, snap, gaugeReaders(true))
}

// RegisterCounts is Register without the latency gauges, for a ring created
// without latency (whose percentiles would only ever read 0).
func RegisterCounts(reg gometrics.Registry, prefix string, snap func() Snapshot) error {
	return register(reg, prefix, snap, gaugeReaders(false))
}

func register(reg gometrics.Registry, prefix string, snap func() Snapshot, gauges []gaugeReader) error {
	if reg == nil || snap == nil {
		return fmt.Errorf("%w: Register needs a registry and a snapshot function", ErrInvalidConfig)
	}
	c := &snapshotCache{snap: snap}
	for i, g := range gauges {
		read := g.read
		gauge := gometrics.NewFunctionalGauge(func() int64 { return read(c.get(i, len(gauges))) })
		if err := reg.Register(prefix+"."+g.name, gauge); err != nil {
			Unregister(reg, prefix)
			return fmt.Errorf("metrics: register %s.%s: %w", prefix, g.name, err)
		}
	}
	return nil
}

// Unregister removes every gauge that Register or RegisterCounts published
// under prefix.
func Unregister(reg gometrics.Registry, prefix string) {
	for _, g := range gaugeReaders(true) {
		reg.Unregister(prefix + "." + g.name)
	}
}

type gaugeReader struct {
	name string
	read func(Snapshot) int64
}

var quantileNames = [len(Quantiles)]string{"p0", "p25", "p50", "p75", "p90", "p95", "p99", "p99_5", "p100"}

func gaugeReaders(latency bool) []gaugeReader {
	var gs []gaugeReader
	for e := range NumEvents {
		name := strings.ToLower(e.String())
		gs = append(gs,
			gaugeReader{"rolling." + name, func(s Snapshot) int64 { return s.Counts[e] }},
			gaugeReader{"cumulative." + name, func(s Snapshot) int64 { return s.Cumulative[e] }})
	}
	gs = append(gs, gaugeReader{"rolling.max", func(s Snapshot) int64 { return s.Max }})
	if !latency {
		return gs
	}
	for _, h := range []struct {
		name string
		lat  func(Snapshot) Latency
	}{{"run_ns", func(s Snapshot) Latency { return s.Run }}, {"total_ns", func(s Snapshot) Latency { return s.Total }}} {
		for qi, q := range quantileNames {
			gs = append(gs, gaugeReader{h.name + "." + q, func(s Snapshot) int64 { return int64(h.lat(s).Percentiles[qi]) }})
		}
		gs = append(gs,
			gaugeReader{h.name + ".mean", func(s Snapshot) int64 { return int64(h.lat(s).Mean) }},
			gaugeReader{h.name + ".count", func(s Snapshot) int64 { return h.lat(s).Count }})
	}
	return gs
}

// snapshotCache hands every gauge the same snapshot within one reporting
// cycle: a gauge read for the second time since the last refresh starts a
// new cycle.
type snapshotCache struct {
	mu    sync.Mutex
	snap  func() Snapshot
	cur   Snapshot
	seen  []bool
	valid bool
}

func (c *snapshotCache) get(i, n int) Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.valid || c.seen[i] {
		c.cur, c.valid = c.snap(), true
		c.seen = make([]bool, n)
	}
	c.seen[i] = true
	return c.cur
}
