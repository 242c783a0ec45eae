package durable

import (
	gometrics "github.com/rcrowley/go-metrics"

	"github.com/bulwark-go/bulwark/gmbridge"
)

// RegisterMetrics publishes the replayer's stats in a go-metrics registry
// (such as the one a gmbridge.Bridge publishes into) as functional
// gauges, read when a reporter asks, with <group> escaped as gmbridge.Name
// does:
//
//	queue.<group>.backlog         pending entries
//	queue.<group>.oldest_age_ms   age of the oldest pending entry
//	queue.<group>.replayed        entries applied by this replayer
//	queue.<group>.dead_lettered   entries dead-lettered by this replayer
//	queue.<group>.dead_letters    entries in the dead letters now
//	queue.<group>.outages         replays failed for an outage (no attempt used)
//	queue.<group>.resets          times the queue's backend state was found gone (Stats.Resets)
//
// It fails if one of the names is already registered.
func (r *Replayer) RegisterMetrics(reg gometrics.Registry) error {
	p := gmbridge.Name("queue", r.cfg.Group.Name())
	for name, read := range map[string]func(ReplayStats) int64{
		".backlog":       func(s ReplayStats) int64 { return int64(s.Depth) },
		".oldest_age_ms": func(s ReplayStats) int64 { return s.OldestAge.Milliseconds() },
		".replayed":      func(s ReplayStats) int64 { return s.Replayed },
		".dead_lettered": func(s ReplayStats) int64 { return s.DeadLettered },
		".dead_letters":  func(s ReplayStats) int64 { return int64(s.DeadLetters) },
		".outages":       func(s ReplayStats) int64 { return s.Outages },
		".resets":        func(s ReplayStats) int64 { return s.Resets },
	} {
		if err := reg.Register(p+name, gometrics.NewFunctionalGauge(func() int64 { return read(r.Stats()) })); err != nil {
			return err
		}
	}
	return nil
}
