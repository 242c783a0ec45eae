package gmbridge

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	gometrics "github.com/rcrowley/go-metrics"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// Bridge publishes the groups of the registries that name it in
// RegistryConfig.Exporter into one go-metrics registry (it has the methods
// that field asks for). It is safe for concurrent use.
type Bridge struct {
	gm gometrics.Registry

	mu     sync.Mutex
	groups map[*command.Group]*exported
}

// exported is what a Bridge published for one group.
type exported struct {
	cache *snapshotCache
	names []string // of the metrics registered, the group's and its commands'
}

// New returns a Bridge that publishes into gm; nil gm: a new private
// go-metrics registry (see Registry), never go-metrics' DefaultRegistry
// unless passed here.
func New(gm gometrics.Registry) *Bridge {
	if gm == nil {
		gm = gometrics.NewRegistry()
	}
	return &Bridge{gm: gm, groups: map[*command.Group]*exported{}}
}

// Registry returns the go-metrics registry b publishes into.
func (b *Bridge) Registry() gometrics.Registry { return b.gm }

// Export publishes g's metrics; NewGroup calls it, and refuses the group
// if a name is already taken (then nothing of g is left registered).
func (b *Bridge) Export(g *command.Group) error {
	e := &exported{cache: &snapshotCache{snap: g.Snapshot}}
	p := Name("group", g.Name())
	ms := windowMetrics(p, false, e.cache, func(s *command.GroupSnapshot) metrics.Snapshot { return s.Metrics })
	maps.Copy(ms, groupMetrics(p, g, e.cache))
	names, err := registerAll(b.gm, ms)
	if err != nil {
		return err
	}
	e.names = names
	b.mu.Lock()
	defer b.mu.Unlock()
	b.groups[g] = e
	return nil
}

// ExportCommand publishes the metrics of g's command cmd; the group calls
// it when it creates the command. On a name already taken it registers
// none of them and returns the error, which the group logs.
func (b *Bridge) ExportCommand(g *command.Group, cmd string) error {
	b.mu.Lock()
	e := b.groups[g]
	b.mu.Unlock()
	if e == nil {
		return fmt.Errorf("gmbridge: group %q is not exported", g.Name())
	}
	p := Name("command", g.Name(), cmd)
	find := func(s *command.GroupSnapshot) *command.CommandSnapshot {
		i := sort.Search(len(s.Commands), func(i int) bool { return s.Commands[i].Name >= cmd })
		if i < len(s.Commands) && s.Commands[i].Name == cmd {
			return &s.Commands[i]
		}
		return &command.CommandSnapshot{} // created, not yet in the table the snapshot read
	}
	ms := windowMetrics(p, true, e.cache, func(s *command.GroupSnapshot) metrics.Snapshot { return find(s).Metrics })
	maps.Copy(ms, commandMetrics(p, g, cmd, e.cache, find))
	names, err := registerAll(b.gm, ms)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e.names = append(e.names, names...)
	return nil
}

// Unexport removes the metrics of g and of its commands; the group's Close
// calls it.
func (b *Bridge) Unexport(g *command.Group) {
	b.mu.Lock()
	e := b.groups[g]
	delete(b.groups, g)
	b.mu.Unlock()
	if e != nil {
		unregisterAll(b.gm, e.names)
	}
}

var _ = command.RegistryConfig{Exporter: (*Bridge)(nil)}

// Name joins go-metrics name parts with dots, escaping each part so that
// its dots are not read as separators: each "%" is written "%25" and each
// "." "%2E" (as in a URL; url.PathUnescape reverses it). Bridge names its
// metrics so; an extension that publishes metrics beside the groups' (the
// write queue's queue.<group>.*) uses it too.
func Name(parts ...string) string {
	escaped := make([]string, len(parts))
	for i, p := range parts {
		escaped[i] = escaper.Replace(p)
	}
	return strings.Join(escaped, ".")
}

// escaper escapes a part of a go-metrics name: "%" first, so that the
// escape of a dot cannot be confused with a name that spells it.
var escaper = strings.NewReplacer("%", "%25", ".", "%2E")

// groupMetrics returns the metrics of group g besides its window's, by
// name, each reading the group's snapshot from c but the breaker's state,
// read live.
func groupMetrics(p string, g *command.Group, c *snapshotCache) map[string]any {
	read := func(f func(*command.GroupSnapshot) int64) func() int64 {
		g := c.gauge()
		return func() int64 { return f(c.get(g)) }
	}
	return map[string]any{
		p + ".bulkhead.active":    gometrics.NewFunctionalGauge(read(func(s *command.GroupSnapshot) int64 { return int64(s.Bulkhead.Active) })),
		p + ".bulkhead.queued":    gometrics.NewFunctionalGauge(read(func(s *command.GroupSnapshot) int64 { return int64(s.Bulkhead.Queued) })),
		p + ".bulkhead.detached":  gometrics.NewFunctionalGauge(read(func(s *command.GroupSnapshot) int64 { return int64(s.Bulkhead.Detached) })),
		p + ".bulkhead.capacity":  gometrics.NewFunctionalGauge(read(func(s *command.GroupSnapshot) int64 { return int64(s.Bulkhead.Capacity) })),
		p + ".bulkhead.completed": counterFunc(read(func(s *command.GroupSnapshot) int64 { return s.Bulkhead.Completed })),
		p + ".bulkhead.rejected":  counterFunc(read(func(s *command.GroupSnapshot) int64 { return s.Bulkhead.Rejected })),
		p + ".circuit.state":      gometrics.NewFunctionalGauge(func() int64 { return int64(g.Breaker().State()) }),
		p + ".config.generation":  counterFunc(read(func(s *command.GroupSnapshot) int64 { return int64(s.ConfigGeneration) })),
	}
}

// commandMetrics returns the metrics of g's command cmd besides its
// window's, by name, each reading the command's snapshot, found by at in
// the group's from c, but the breaker's state, read live.
func commandMetrics(p string, g *command.Group, cmd string, c *snapshotCache, at func(*command.GroupSnapshot) *command.CommandSnapshot) map[string]any {
	read := func(f func(*command.CommandSnapshot) int64) func() int64 {
		g := c.gauge()
		return func() int64 { return f(at(c.get(g))) }
	}
	return map[string]any{
		p + ".inflight": gometrics.NewFunctionalGauge(read(func(s *command.CommandSnapshot) int64 { return s.InFlight })),
		p + ".circuit.state": gometrics.NewFunctionalGauge(func() int64 {
			b, _ := g.CommandBreaker(cmd)
			if b == nil {
				return int64(circuit.Closed) // being created: not yet in the group's table
			}
			return int64(b.State())
		}),
		p + ".calls":    counterFunc(read(func(s *command.CommandSnapshot) int64 { return s.Metrics.Cumulative.Calls() })),
		p + ".degraded": counterFunc(read(func(s *command.CommandSnapshot) int64 { return s.Metrics.Cumulative[metrics.FallbackSuccess] })),
	}
}

// registerAll registers every metric of ms and returns their names, or
// registers none: on a clash it removes those it added and returns the
// error.
func registerAll(reg gometrics.Registry, ms map[string]any) ([]string, error) {
	var done []string
	for _, name := range slices.Sorted(maps.Keys(ms)) {
		if err := reg.Register(name, ms[name]); err != nil {
			unregisterAll(reg, done)
			return nil, fmt.Errorf("gmbridge: register %s: %w", name, err)
		}
		done = append(done, name)
	}
	return done, nil
}

func unregisterAll(reg gometrics.Registry, names []string) {
	for _, n := range names {
		reg.Unregister(n)
	}
}

// counterFunc is a read-only go-metrics Counter over one of our counters.
// Like go-metrics' own snapshots, it panics when asked to change.
type counterFunc func() int64

func (f counterFunc) Count() int64                { return f() }
func (f counterFunc) Snapshot() gometrics.Counter { return gometrics.CounterSnapshot(f()) }
func (counterFunc) Clear()                        { panic("gmbridge: Clear called on a read-only counter") }
func (counterFunc) Inc(int64)                     { panic("gmbridge: Inc called on a read-only counter") }
func (counterFunc) Dec(int64)                     { panic("gmbridge: Dec called on a read-only counter") }
