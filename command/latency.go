package command

import (
	"maps"
	"slices"

	"github.com/bulwark-go/bulwark/metrics"
)

// CommandLatency is the latency distribution of one command since it was
// created: run time (Run alone) and total time (what the caller waited).
type CommandLatency struct {
	Group, Command string
	Run, Total     *metrics.Distribution
}

// CumulativeLatencies returns the latency distributions of every command
// since it was created, sorted by group and command name: what an exporter
// of cumulative histograms needs (Snapshot's percentiles cover the rolling
// window only). Each command costs a copy of two 10 KiB accumulators and a
// read of its window's histograms, so call it on a schedule (a scrape), not
// per request.
func (r *Registry) CumulativeLatencies() []CommandLatency {
	var ls []CommandLatency
	for _, g := range r.sortedGroups() {
		t := g.commands.Load()
		for _, name := range slices.Sorted(maps.Keys(t.byName)) {
			run, total := t.byName[name].metrics.CumulativeLatency()
			ls = append(ls, CommandLatency{Group: g.name, Command: name, Run: run, Total: total})
		}
	}
	return ls
}
