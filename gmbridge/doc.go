// Package gmbridge publishes a command.Registry's groups and commands into
// a go-metrics registry (github.com/rcrowley/go-metrics), for its
// reporters (WriteOnce, WriteJSONOnce, Graphite...). It is optional: the
// executor keeps its own counters, and without a Bridge no go-metrics value
// is built. go-metrics has been archived upstream (April 2025); bulwark
// keeps it only as this bridge.
//
// Set a Bridge as the registry's exporter:
//
//	gm := gometrics.NewRegistry()
//	reg := command.NewRegistry(command.RegistryConfig{Exporter: gmbridge.New(gm)})
//
// The names, with <window> standing for rolling.<event> and
// cumulative.<event> (counts per event, lower case: rolling.short_circuited),
// rolling.max, and for commands run_ns.<q> and total_ns.<q> (latency
// percentiles in ns, q: p0 p25 p50 p75 p90 p95 p99 p99_5 p100, mean, count),
// and <group> and <command> escaped by Name so that a dot in them is not
// read as a separator. So group "a.b" with command "c" publishes
// command.a%2Eb.c.calls, and group "a" with command "b.c"
// command.a.b%2Ec.calls:
//
//	group.<group>.<window>                      the sum of its commands' counts (no latencies); rolling.max: peak running calls
//	group.<group>.bulkhead.active|queued|detached|capacity   gauges
//	group.<group>.bulkhead.completed|rejected   counters
//	group.<group>.circuit.state                 gauge: 0 closed, 1 open, 2 half-open
//	group.<group>.config.generation             counter: accepted Reconfigure calls
//	command.<group>.<command>.<window>          the command's counts and latencies
//	command.<group>.<command>.inflight          gauge
//	command.<group>.<command>.circuit.state     gauge
//	command.<group>.<command>.calls|degraded    counters: calls, and calls served by a fallback
//
// Every one is a functional gauge or a read-only counter that reads, when
// a reporter asks, the breaker's state or else the group's snapshot
// (command.Group.Snapshot); nothing
// is recorded through go-metrics, so it stays off the call path, and no
// Meter (whose ticker goroutine never exits) is created. A reporter reading
// all the gauges once per cycle takes one snapshot of each group per cycle:
// the snapshot is reused until one of the group's gauges is read a second
// time. A group's metrics are removed by its Close. Use
// gometrics.NewPrefixedChildRegistry to put them under a prefix of your own.
package gmbridge
