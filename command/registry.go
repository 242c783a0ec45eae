package command

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
)

// ErrClosed is the error of NewGroup and GroupOrNew once the registry's
// Close has begun, and is matched by the errors of Reconfigure and Execute
// on a closed group (by Group.Close or Registry.Close). It also matches
// isolation.ErrClosed.
var ErrClosed error = &kindError{"command: closed", isolation.ErrClosed, nil}

// RegistryConfig configures a Registry. Every field is optional.
type RegistryConfig struct {
	// Exporter publishes every group and command to a metrics system: a
	// *gmbridge.Bridge, into a go-metrics registry (package gmbridge;
	// nothing else fits). Default: nil, none (the snapshots, the stream
	// and package prom read the groups anyway).
	Exporter exporter
	// Clock tells time to the metrics and, unless their config sets one, the
	// breakers. Default metrics.SystemClock().
	Clock metrics.Clock
	// Logger receives the log records of the registry's groups (panics in
	// Run or Fallback, renamed commands, ...), each naming its group, and of
	// their breakers unless a breaker's config sets one. Default
	// slog.Default().
	Logger *slog.Logger
	// Hook, if set, follows every attempt of every call in the registry's
	// groups (a tracer: see CallHook). Default: none, at the cost of a nil
	// test per attempt.
	Hook CallHook
}

// Registry holds the groups of an application: it creates them, exports
// their metrics (RegistryConfig.Exporter) and snapshots them for
// dashboards. There is no
// global registry: create one with NewRegistry and pass it around. A zero
// Registry is ready to use, configured as by NewRegistry(RegistryConfig{});
// a Registry must not be copied after first use. A Registry is safe for
// concurrent use.
type Registry struct {
	once   sync.Once // sets the fields below: NewRegistry's config, or the defaults
	export exporter  // nil: none
	clock  metrics.Clock
	logger *slog.Logger
	hook   CallHook

	mu       sync.RWMutex
	groups   map[string]*Group
	closed   bool        // Close has begun: no group may be created
	readOnly atomic.Bool // SetReadOnly's switch

	workers *isolation.Workers // the goroutines of every Thread group, under mu; nil until the first
}

// NewRegistry returns an empty registry configured by cfg.
func NewRegistry(cfg RegistryConfig) *Registry {
	r := &Registry{}
	r.once.Do(func() { r.setup(cfg) })
	return r
}

// ready configures a zero Registry with the defaults on its first use.
func (r *Registry) ready() { r.once.Do(func() { r.setup(RegistryConfig{}) }) }

// setup applies cfg and its defaults; see RegistryConfig.
func (r *Registry) setup(cfg RegistryConfig) {
	r.export, r.clock, r.logger, r.hook, r.groups = cfg.Exporter, cfg.Clock, cfg.Logger, cfg.Hook, map[string]*Group{}
	if r.clock == nil {
		r.clock = metrics.SystemClock()
	}
	if r.logger == nil {
		r.logger = slog.Default()
	}
}

// Config returns the registry's effective configuration: NewRegistry's
// config (a zero Registry's is empty) with its defaults applied. Its Clock
// is the clock of the registry's groups, so a rate limiter built for a
// group on it tells time as the group does; its Logger is theirs.
func (r *Registry) Config() RegistryConfig {
	r.ready()
	return RegistryConfig{Exporter: r.export, Clock: r.clock, Logger: r.logger, Hook: r.hook}
}

// NewGroup creates the group called name. The error wraps ErrInvalidConfig
// and names the field when cfg is invalid or the name is empty or taken; it
// matches ErrClosed once Close has begun.
func (r *Registry) NewGroup(name string, cfg GroupConfig) (*Group, error) {
	r.ready()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.groups[name]; ok && !r.closed {
		return nil, fmt.Errorf("%w: group %q already exists", ErrInvalidConfig, name)
	}
	return r.create(name, cfg)
}

// GroupOrNew returns the group called name, creating it with cfg if there
// is none: the group of a name that is known only when the first call comes
// (such as a host, see package httpguard). Concurrent first calls create one
// group, which they all get. cfg is used only to create the group: an
// existing group, even one created with another config, is returned as is.
// A closed group is no longer in the registry, so the next GroupOrNew of its
// name creates a new one. The errors are NewGroup's.
func (r *Registry) GroupOrNew(name string, cfg GroupConfig) (*Group, error) {
	if g, ok := r.Group(name); ok {
		return g, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if g, ok := r.groups[name]; ok {
		return g, nil
	}
	return r.create(name, cfg)
}

// Group returns the group called name, and false if there is none (or it
// was closed).
func (r *Registry) Group(name string) (*Group, bool) {
	r.ready()
	r.mu.RLock()
	defer r.mu.RUnlock()
	g, ok := r.groups[name]
	return g, ok
}

// create creates, exports and adds the group called name; r.mu is held.
func (r *Registry) create(name string, cfg GroupConfig) (*Group, error) {
	if r.closed {
		return nil, fmt.Errorf("group %q: %w", name, ErrClosed)
	}
	g, err := newGroup(r, name, cfg)
	if err != nil {
		return nil, err
	}
	if r.export != nil {
		if err := r.export.Export(g); err != nil {
			return nil, errors.Join(err, g.closeBulkhead(context.Background()))
		}
	}
	r.groups[name] = g
	for _, cmd := range slices.Sorted(maps.Keys(g.cfg().Commands)) {
		g.addCommand(cmd)
	}
	if g.alerts != nil {
		g.alerts.Watch(g, g.quiet, g.logger)
	}
	return g, nil
}

// threadWorkers returns the goroutines the registry's Thread groups share,
// started with the first: an idle group then runs none of its own. r.mu is
// held.
func (r *Registry) threadWorkers() (*isolation.Workers, error) {
	if r.workers == nil {
		w, err := isolation.NewWorkers(r.logger)
		if err != nil {
			return nil, err
		}
		r.workers = w
	}
	return r.workers, nil
}

// remove forgets g and unexports its metrics.
func (r *Registry) remove(g *Group) {
	r.mu.Lock()
	if r.groups[g.name] == g {
		delete(r.groups, g.name)
	}
	r.mu.Unlock()
	if r.export != nil {
		r.export.Unexport(g)
	}
}

// Snapshot describes every group and command now, sorted by name. It reads
// counters and histograms without stopping the executors; it is meant to be
// called on a schedule (the stream does every 500 ms).
func (r *Registry) Snapshot() Snapshot {
	groups := r.sortedGroups()
	s := Snapshot{Time: time.Now(), Groups: make([]GroupSnapshot, len(groups))}
	for i, g := range groups {
		s.Groups[i] = g.Snapshot()
	}
	return s
}

// sortedGroups returns the registry's groups sorted by name.
func (r *Registry) sortedGroups() []*Group {
	r.ready()
	r.mu.RLock()
	groups := make([]*Group, 0, len(r.groups))
	for _, g := range r.groups {
		groups = append(groups, g)
	}
	r.mu.RUnlock()
	slices.SortFunc(groups, func(a, b *Group) int { return cmp.Compare(a.name, b.name) })
	return groups
}

// Close closes the registry for good: from then on NewGroup and GroupOrNew
// return an error matching ErrClosed. It closes every group (see
// Group.Close) and waits for their calls in progress, detached ones
// included (a Thread call whose caller left at its deadline keeps its
// worker until its Run returns), until ctx ends: give ctx a deadline to
// bound the wait. It returns nil when every call has finished, at once if
// none was running (whatever ctx), else the groups' errors joined (each
// an *isolation.CloseError that says what was cut off, matching ctx's
// error). Calls still running then finish on their own; their results are
// dropped. Last it stops the worker goroutines the Thread groups share
// (an idle Thread group runs none of its own), once every group is closed,
// those that a Group.Close of their own is closing at the same time
// included (waited for until ctx ends too). A second Close returns nil.
func (r *Registry) Close(ctx context.Context) error {
	r.ready()
	r.mu.Lock()
	r.closed = true
	groups := slices.Collect(maps.Values(r.groups))
	workers := r.workers
	r.mu.Unlock()
	var errs []error
	for _, g := range groups {
		if err := g.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("group %q: %w", g.name, err))
		}
	}
	if workers != nil {
		if err := workers.Close(ctx); err != nil && !errors.Is(err, isolation.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
