package command

import (
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
		for _, c := range g.commands.Load().names.byNameOrder() {
			run, total := c.metrics.CumulativeLatency()
			ls = append(ls, CommandLatency{Group: g.name, Command: c.name, Run: run, Total: total})
		}
	}
	return ls
}
