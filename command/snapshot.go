package command

import (
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command/adaptive"
	"github.com/bulwark-go/bulwark/command/throttle"
	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
)

// Snapshot describes every group and command of a Registry at one instant.
// Registry.Snapshot builds it; the dashboard and stream read it.
type Snapshot struct {
	// Time is the wall-clock time the snapshot was taken.
	Time time.Time
	// Groups holds one entry per group, sorted by name.
	Groups []GroupSnapshot
}

// GroupSnapshot describes one group: its bulkhead, its group-level breaker,
// its pool metrics and its commands.
type GroupSnapshot struct {
	Name string
	// Config is the group's effective configuration at the snapshot, what
	// Group.Config returned then (defaults applied): its Strategy, its
	// default Timeout (NoTimeout when there is none), its FallbackLimit, ...
	// Its Commands map is the group's own: read it, never modify it.
	Config GroupConfig
	// Bulkhead holds the bulkhead's live gauges and counters.
	Bulkhead isolation.Stats

	// Breaker is the group-level breaker's state and thresholds.
	Breaker circuit.Snapshot

	// Metrics is the group's rolling window: its commands' counts summed
	// (threads executed, rejections, ...), and in Max the largest number of
	// calls running at once (Hystrix's rollingMaxActiveThreads). Run and
	// Total are zero: latencies are per command.
	Metrics metrics.Snapshot

	// Throttle tells the client-side throttle (GroupConfig.Throttle): its
	// window's requests and accepts and the share of calls it refuses
	// now. The zero value when it is off.
	Throttle throttle.Status

	// Adaptive tells the adaptive concurrency limit (GroupConfig.Adaptive):
	// the limit in force (Bulkhead.Capacity too) and the latencies it
	// follows. The zero value when it is off.
	Adaptive adaptive.Status

	// Commands holds one entry per command name seen in the group (or
	// declared in GroupConfig.Commands), sorted by name.
	Commands []CommandSnapshot
	// RenamedCommands counts the commands of Commands named by the renamed
	// form of the name their calls give, one not valid UTF-8 or longer than
	// MaxNameLength.
	RenamedCommands int

	// AlertTier is the alert tier the group's breaker has reached in its
	// current outage (see GroupConfig.Alerts); "" when none or alerts are off.
	AlertTier string

	// ConfigGeneration counts the group's accepted Reconfigure calls: 0 as
	// created. ConfigAge is the time since the last one (since creation
	// while ConfigGeneration is 0).
	ConfigGeneration uint64
	ConfigAge        time.Duration
}

// CommandSnapshot describes one command (a command name within a group):
// an element of its GroupSnapshot's Commands, whose Name is the group's.
type CommandSnapshot struct {
	Name string
	// InFlight is the number of calls of this command executing now (from
	// admission until Execute returns).
	InFlight int64
	// Detached is the number of calls of this command that timed out (or
	// whose caller left) while Run goes on in the pool (Thread only; always
	// 0 for Semaphore): each keeps its worker until Run returns.
	Detached int64
	// Coalescing is the number of calls of this command waiting for the
	// answer of a Run another call started (CommandConfig.Coalesce), each
	// to be COALESCED.
	Coalescing int64
	// Timeout is the command's default timeout; NoTimeout when there is none.
	Timeout time.Duration

	// Breaker is the command's own breaker's state and thresholds.
	Breaker circuit.Snapshot

	// Metrics is the command's rolling window, with run and total latency,
	// and in Max the largest number of calls of the command in flight at
	// once (Hystrix's rollingMaxConcurrentExecutionCount).
	Metrics metrics.Snapshot

	// AlertTier is the alert tier the command's breaker has reached in its
	// current outage (see GroupConfig.Alerts); "" when none or alerts are
	// off. DegradedAlarm tells that its degraded alarm is raised.
	AlertTier     string
	DegradedAlarm bool

	live *metrics.Rolling // the command's metrics, for Latencies
}

// Latencies returns the command's latency distributions since it was
// created: run time (Run alone) and total time (what the caller waited),
// what an exporter of cumulative histograms needs (Metrics' percentiles
// cover the rolling window only). They are read when it is called, not at
// the snapshot's instant. Each call merges what left the window and the
// window's histograms into two 10 KiB accumulators, so call it on a
// schedule (a scrape), not per request. A CommandSnapshot that
// Registry.Snapshot did not build has none: both are nil.
func (s *CommandSnapshot) Latencies() (run, total *metrics.Distribution) {
	if s.live == nil {
		return nil, nil
	}
	return s.live.CumulativeLatency()
}

// TotalLatencies returns the count and the sum of the command's total
// latencies since it was created: Latencies' total Count and Sum, read
// without building either distribution (see metrics.Rolling.CumulativeTotal),
// for an exporter that needs no buckets. ok is false where Latencies
// returns nil.
func (s *CommandSnapshot) TotalLatencies() (count int64, sum time.Duration, ok bool) {
	if s.live == nil {
		return 0, 0, false
	}
	return s.live.CumulativeTotal()
}
