// Package bulwarkotel reports a bulwark command.Registry to OpenTelemetry:
// NewMetrics registers observable instruments that read the registry's
// snapshot at each collection (nothing added to the call path) and count
// every breaker transition; NewHook returns a command.CallHook that tells
// each call's outcome to the caller's span (or to one span per attempt)
// and records its latency in histograms. It lives in its own module, so
// that applications that do not use OpenTelemetry never pull it in.
//
//	cfg := bulwarkotel.Config{MeterProvider: mp, TracerProvider: tp}
//	hook, err := bulwarkotel.NewHook(cfg)
//	reg := command.NewRegistry(command.RegistryConfig{Hook: hook})
//	m, err := bulwarkotel.NewMetrics(reg, cfg)
//	defer m.Close()
//
// # Metrics
//
// Attributes (keys Key...): bulwark.group and bulwark.command (names the
// application chose), bulwark.event (an event's label, metrics.Event.Label:
// "success", "short_circuited"; docs/events.md lists them),
// bulwark.circuit.state ("closed", "open", "half-open"),
// bulwark.circuit.mode ("normal", "forced-open", "forced-closed",
// "observe-only"), and a transition's bulwark.circuit.from, .to and
// .reason ("error_ratio", "probe_failed", ...).
//
//	bulwark.command.events              counter {event}         group, command, event: every event kind, zeros included
//	bulwark.command.calls               counter {call}          group, command: callers' calls (attempts less retried ones)
//	bulwark.command.in_flight           updowncounter {call}    group, command: calls executing now
//	bulwark.command.detached            updowncounter {call}    group, command: timed-out calls whose Run still runs
//	bulwark.command.degraded.ratio      gauge 1                 group, command: share of the window's calls served by a fallback
//	bulwark.command.circuit.state       gauge 1                 group, command, state: 1 for the breaker's state, 0 for the others
//	bulwark.command.circuit.mode        gauge 1                 group, command, mode: 1 for the breaker's mode, 0 for the others
//	bulwark.command.circuit.transitions counter {transition}    group, command, from, to, reason
//	bulwark.group.circuit.state         gauge 1                 group, state: the group's breaker
//	bulwark.group.circuit.mode          gauge 1                 group, mode
//	bulwark.group.circuit.transitions   counter {transition}    group, from, to, reason
//	bulwark.bulkhead.active             updowncounter {call}    group: slots or permits taken
//	bulwark.bulkhead.queued             updowncounter {call}    group: calls waiting for a worker
//	bulwark.bulkhead.capacity           updowncounter {call}    group: pool size or semaphore limit
//	bulwark.bulkhead.queue.capacity     updowncounter {call}    group: queue size (0 for a semaphore)
//	bulwark.bulkhead.detached           updowncounter {call}    group: work running whose caller left
//	bulwark.bulkhead.rejected           counter {call}          group: calls refused because it was full
//	bulwark.bulkhead.completed          counter {call}          group: work that returned
//	bulwark.command.duration            histogram s             group, command, event: a call's latency as its caller saw it (Hook)
//	bulwark.command.run.duration        histogram s             group, command, event: an attempt's Run (Hook)
//
// The counters are bulwark's cumulative counts (metrics.Snapshot.Cumulative):
// a group closed and created again starts from zero, a counter reset. The
// quantities that add up across instances (in flight, bulkhead slots) are
// updowncounters, as the semantic conventions advise; the others are
// gauges. The histograms have buckets at 1, 2.5, 5, 10, 25, 50, 100, 250
// and 500 ms, 1, 2.5, 5 and 10 s (a View can change them); only a Hook
// records them, on each call, as OpenTelemetry has no observable
// histogram.
//
// A breaker's transitions are read, like everything else, from the
// registry's snapshot (circuit.Snapshot.TransitionCounts, which counts every
// transition since the breaker was created), so flaps between two
// collections are all counted, and so are the transitions a breaker made
// before Metrics existed.
//
// Cardinality: the registry bounds every name (GroupConfig.MaxCommands
// per group, each at most command.MaxNameLength bytes of valid UTF-8), so
// the series are bounded: metrics.NumEvents (one series per event kind) per command for the
// events counter, 3 states and 4 modes per breaker, one per transition kind
// taken, one per outcome for the histograms. The SDK caps each instrument
// at 2000 attribute sets by default and folds the rest into one overflow
// series (otel.metric.overflow=true): a registry of more than 100 commands
// needs a higher sdkmetric.WithCardinalityLimit.
//
// # Traces
//
// Without Config.AttemptSpans the hook starts no span: if the caller's
// context carries a span that records, each attempt that is retried adds
// an event "bulwark.attempt" to it and the call's end an event
// "bulwark.call", with attributes bulwark.group, bulwark.command,
// bulwark.event (the primary outcome), bulwark.attempt (the attempt's
// number, from 1), bulwark.circuit.state and bulwark.group.circuit.state
// (the command's and the group's breakers after the attempt),
// bulwark.probe (a half-open probe), and bulwark.retried on a retried
// attempt or, on the call, bulwark.degraded, bulwark.fallback (the
// fallback's event, when a fallback was considered) and bulwark.deferred.
// Events, not attributes, because a handler's span may hold several calls;
// the caller's span's status is left to the caller.
//
// With Config.AttemptSpans each attempt gets a span "bulwark
// GROUP/COMMAND" (kind internal, a child of the caller's span, or a root),
// which Run's context carries, so that the dependency's spans nest under
// the attempt that made them; it gets the same attributes, and status
// Error when the attempt failed or the caller got an error (a fallback's
// value is not an error: bulwark.degraded says it).
package bulwarkotel
