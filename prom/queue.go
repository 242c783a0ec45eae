package prom

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// QueueStats is one deferred-write queue's figures, as a replayer reports
// them: a plain struct, so that this module needs no queue module.
// durable.Replayer.Stats has every field (see QueueCollector).
type QueueStats struct {
	// Group names the group whose writes the queue holds; one QueueStats
	// per group.
	Group string
	// Backlog is the number of pending entries.
	Backlog int
	// OldestAge is how long the oldest pending entry has waited; 0 when
	// the backlog is empty.
	OldestAge time.Duration
	// Replayed and DeadLettered count the entries the replayer applied and
	// dead-lettered since it was created (counters: they never decrease
	// while it lives).
	Replayed, DeadLettered int64
	// DeadLetters is the number of entries in the dead letters now.
	DeadLetters int
	// Outages counts the replays that met an outage of the dependency
	// (they cost the write no attempt), and Resets the times the queue
	// found its backend's state gone and set it up again (counters).
	Outages, Resets int64
	// Err is the error of the replayer's last attempt to read the queue's
	// figures (the backlog figures are then the last read), or nil.
	Err error
}

// QueueCollector is a prometheus.Collector over deferred-write queues: each
// scrape calls its function once and exports, labelled with group:
//
//	bulwark_queue_backlog{group}              gauge: pending entries
//	bulwark_queue_oldest_age_seconds{group}   gauge: age of the oldest pending entry
//	bulwark_queue_replayed_total{group}       counter: entries applied by the replayer
//	bulwark_queue_dead_lettered_total{group}  counter: entries dead-lettered by the replayer
//	bulwark_queue_dead_letters{group}         gauge: entries in the dead letters now
//	bulwark_queue_outages_total{group}        counter: replays that met an outage (no attempt used)
//	bulwark_queue_resets_total{group}         counter: times the backend's state was found gone
//	bulwark_queue_stats_error{group}          gauge: 1 if the last read of the queue failed
//	bulwark_queue_dropped_series_total        counter: series left out (a group not valid UTF-8)
//
// The glue for module durable's replayers (one line per replayer):
//
//	q, err := prom.NewQueues(func() []prom.QueueStats {
//		s := replayer.Stats()
//		return []prom.QueueStats{{Group: s.Group, Backlog: s.Depth, OldestAge: s.OldestAge,
//			Replayed: s.Replayed, DeadLettered: s.DeadLettered, DeadLetters: s.DeadLetters,
//			Outages: s.Outages, Resets: s.Resets, Err: s.Err}}
//	})
//
// It is safe for concurrent use if its function is.
type QueueCollector struct {
	read    func() []QueueStats
	dropped atomic.Uint64 // series left out of scrapes: see bulwark_queue_dropped_series_total
}

// NewQueues returns a collector that calls read at every scrape. The error
// matches ErrNilSource when read is nil.
func NewQueues(read func() []QueueStats) (*QueueCollector, error) {
	if read == nil {
		return nil, ErrNilSource
	}
	return &QueueCollector{read: read}, nil
}

var (
	backlogDesc      = desc("queue_backlog", "Pending entries in the group's deferred-write queue.", "group")
	oldestAgeDesc    = desc("queue_oldest_age_seconds", "How long the oldest pending entry of the queue has waited (0 when empty).", "group")
	replayedDesc     = desc("queue_replayed_total", "Entries the replayer applied since it was created.", "group")
	deadLetteredDesc = desc("queue_dead_lettered_total", "Entries the replayer dead-lettered since it was created.", "group")
	deadLettersDesc  = desc("queue_dead_letters", "Entries in the queue's dead letters now.", "group")
	outagesDesc      = desc("queue_outages_total", "Replays that met an outage of the dependency (they used no attempt).", "group")
	resetsDesc       = desc("queue_resets_total", "Times the queue found its backend's state gone and set it up again.", "group")
	statsErrDesc     = desc("queue_stats_error", "1 if the replayer's last read of the queue's figures failed (backlog figures are then the last read), else 0.", "group")
	queueDroppedDesc = desc("queue_dropped_series_total", "Queue series left out of scrapes because they could not be built (a group name not valid UTF-8).")

	queueDescs = []*prometheus.Desc{backlogDesc, oldestAgeDesc, replayedDesc, deadLetteredDesc, deadLettersDesc, outagesDesc, resetsDesc, statsErrDesc}
)

// Describe sends the descriptions of every metric the collector exports.
func (q *QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range queueDescs {
		ch <- d
	}
	ch <- queueDroppedDesc
}

// Collect calls the collector's function and sends its queues' metrics. A
// group named twice is a mistake in that function: its second entry is
// sent as an invalid metric naming the group, which fails the scrape. A
// series that cannot be built (a group name not valid UTF-8) is left out
// and counted in bulwark_queue_dropped_series_total: one bad name never
// fails the scrape.
func (q *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	o := out{ch: ch, dropped: &q.dropped}
	seen := map[string]bool{}
	for _, s := range q.read() {
		if seen[s.Group] {
			ch <- prometheus.NewInvalidMetric(backlogDesc, fmt.Errorf("prom: queue group %q is listed twice", s.Group))
			continue
		}
		seen[s.Group] = true
		o.gauge(backlogDesc, float64(s.Backlog), s.Group)
		o.gauge(oldestAgeDesc, s.OldestAge.Seconds(), s.Group)
		o.counter(replayedDesc, float64(s.Replayed), s.Group)
		o.counter(deadLetteredDesc, float64(s.DeadLettered), s.Group)
		o.gauge(deadLettersDesc, float64(s.DeadLetters), s.Group)
		o.counter(outagesDesc, float64(s.Outages), s.Group)
		o.counter(resetsDesc, float64(s.Resets), s.Group)
		o.gauge(statsErrDesc, oneIf(s.Err != nil), s.Group)
	}
	ch <- prometheus.MustNewConstMetric(queueDroppedDesc, prometheus.CounterValue, float64(q.dropped.Load()))
}
