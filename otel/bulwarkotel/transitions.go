package bulwarkotel

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/bulwark-go/bulwark/circuit"
)

// watched is a breaker whose transitions Metrics counts: one series of its
// transitions counter per edge (from, to, reason) taken.
type watched struct {
	stop   func()                        // ends the breaker's Observe
	inst   metric.Int64ObservableCounter // the group's or the command's transitions counter
	base   []attribute.KeyValue          // its group (and command) attributes
	counts map[edge]int64                // guarded by Metrics.mu
}

// edge is one kind of transition: a counter series.
type edge struct {
	from, to circuit.State
	reason   circuit.Reason
}

// watch marks b seen and, the first time, counts its transitions from now
// on into inst with attributes base, after the ones its snapshot snap
// (taken before this call) still holds: so a breaker that tripped before
// Metrics first saw it (a command's breaker appears with its first call)
// still counts the transitions of its history (its last eight). m.mu is
// held: the observer waits for it, and checks that w is still watched
// (an observer stopped may still be called once).
func (m *Metrics) watch(b *circuit.Breaker, snap circuit.Snapshot, inst metric.Int64ObservableCounter, base []attribute.KeyValue, seen map[*circuit.Breaker]bool) {
	seen[b] = true
	if _, ok := m.watched[b]; ok {
		return
	}
	w := &watched{inst: inst, base: base, counts: map[edge]int64{}}
	for _, t := range snap.Transitions {
		w.counts[edge{t.From, t.To, t.Reason}]++
	}
	m.watched[b] = w
	w.stop = b.Observe(func(t circuit.Transition) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.watched[b] == w {
			w.counts[edge{t.From, t.To, t.Reason}]++
		}
	})
}

// observe observes w's counts. Metrics.mu is held.
func (w *watched) observe(o metric.Observer) {
	for e, n := range w.counts {
		o.ObserveInt64(w.inst, n, with(w.base,
			KeyFrom.String(e.from.String()), KeyTo.String(e.to.String()), KeyReason.String(string(e.reason))))
	}
}
