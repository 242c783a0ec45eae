package prom

import (
	"fmt"
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
//	bulwark_queue_stats_error{group}          gauge: 1 if the last read of the queue failed
//
// The glue for module durable's replayers (one line per replayer):
//
//	q, err := prom.NewQueues(func() []prom.QueueStats {
//		s := replayer.Stats()
//		return []prom.QueueStats{{Group: s.Group, Backlog: s.Depth, OldestAge: s.OldestAge,
//			Replayed: s.Replayed, DeadLettered: s.DeadLettered, DeadLetters: s.DeadLetters, Err: s.Err}}
//	})
//
// It is safe for concurrent use if its function is.
type QueueCollector struct {
	read func() []QueueStats
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
	statsErrDesc     = desc("queue_stats_error", "1 if the replayer's last read of the queue's figures failed (backlog figures are then the last read), else 0.", "group")

	queueDescs = []*prometheus.Desc{backlogDesc, oldestAgeDesc, replayedDesc, deadLetteredDesc, deadLettersDesc, statsErrDesc}
)

// Describe sends the descriptions of every metric the collector exports.
func (q *QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range queueDescs {
		ch <- d
	}
}

// Collect calls the collector's function and sends its queues' metrics. A
// group named twice is a mistake in that function: its second entry is
// sent as an invalid metric naming the group, which fails the scrape.
func (q *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	seen := map[string]bool{}
	for _, s := range q.read() {
		if seen[s.Group] {
			ch <- prometheus.NewInvalidMetric(backlogDesc, fmt.Errorf("prom: queue group %q is listed twice", s.Group))
			continue
		}
		seen[s.Group] = true
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, s.Group)
		}
		gauge(backlogDesc, float64(s.Backlog))
		gauge(oldestAgeDesc, s.OldestAge.Seconds())
		ch <- prometheus.MustNewConstMetric(replayedDesc, prometheus.CounterValue, float64(s.Replayed), s.Group)
		ch <- prometheus.MustNewConstMetric(deadLetteredDesc, prometheus.CounterValue, float64(s.DeadLettered), s.Group)
		gauge(deadLettersDesc, float64(s.DeadLetters))
		gauge(statsErrDesc, oneIf(s.Err != nil))
	}
}
