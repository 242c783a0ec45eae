package rules

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/bulwark-go/bulwark/command"
)

// DefaultInterval is how often Watch reads the rules file by default.
const DefaultInterval = 250 * time.Millisecond

// Manager applies rules documents to the groups of one registry. It keeps
// each group's baseline (see the package doc). A Manager is safe for
// concurrent use; documents are applied one at a time.
type Manager struct {
	reg    *command.Registry
	logger *slog.Logger

	mu        sync.Mutex
	baselines map[string]command.GroupConfig // by group, as first touched
	named     map[string]bool                // groups the document in force names
	applied   int                            // documents applied
	lastErr   error                          // of the last document tried
	lastSum   [sha256.Size]byte              // of the last document ApplyJSON applied
	limits    map[limitSlot]builtLimit       // the limiters of the document in force
}

// NewManager returns a Manager for the groups of reg, logging on logger
// (nil: the registry's), or an error if reg is nil. The
// rate limiters the rules build tell time by the registry's clock.
func NewManager(reg *command.Registry, logger *slog.Logger) (*Manager, error) {
	if reg == nil {
		return nil, errors.New("rules: NewManager: the registry is nil")
	}
	if logger == nil {
		logger = reg.Config().Logger
	}
	return &Manager{reg: reg, logger: logger, baselines: map[string]command.GroupConfig{}, named: map[string]bool{}}, nil
}

// ApplyJSON parses a rules document and applies it; see Apply.
func (m *Manager) ApplyJSON(data []byte) error {
	doc, err := Parse(data)
	if err != nil {
		m.mu.Lock()
		m.lastErr = err
		m.mu.Unlock()
		return err
	}
	if err := m.Apply(doc); err != nil {
		return err
	}
	m.mu.Lock()
	m.lastSum = sha256.Sum256(data)
	m.mu.Unlock()
	return nil
}

// Apply applies doc to the registry's groups, all or nothing: every new
// config is checked before the first change, and any error (wrapping
// ErrInvalid, naming the group and field) leaves every group as it was.
// Groups doc names that do not exist are created, before any existing
// group changes: if the registry refuses one (a name its go-metrics
// registry already holds, say), those created are closed again and no
// group changed. Groups the previous document named that doc does not are
// returned to their baseline. The one change that can fail after that is
// the reconfiguration of a group that code closes meanwhile; the error
// then names it.
func (m *Manager) Apply(doc *Document) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := m.applyLocked(doc)
	m.lastErr = err
	if err == nil {
		m.applied++
		m.logger.Info("bulwark: rules applied", slog.Int("groups", len(doc.Groups)), slog.Int("documents", m.applied))
	}
	return err
}

// plan is one group's change.
type plan struct {
	name  string
	group *command.Group // nil: to create
	cfg   command.GroupConfig
}

func (m *Manager) applyLocked(doc *Document) error {
	lim := &limits{clock: m.reg.Config().Clock, prev: m.limits, next: map[limitSlot]builtLimit{}}
	plans, err := m.plan(doc, lim)
	if err != nil {
		return err
	}
	if err := m.create(plans); err != nil {
		return err
	}
	var errs []error
	for _, p := range plans {
		if p.group == nil {
			continue
		}
		if _, known := m.baselines[p.name]; !known {
			m.baselines[p.name] = p.group.Config()
		}
		if err := p.group.Reconfigure(p.cfg); err != nil { // only a race with code that closed the group; it names the group
			errs = append(errs, err)
		}
	}
	m.limits = lim.next
	m.named = map[string]bool{}
	for name := range doc.Groups {
		m.named[name] = true
	}
	return errors.Join(errs...)
}

// plan returns the change of every group doc names or the document in
// force named, each checked as the registry and the group would check it,
// or every refusal it finds, each wrapping ErrInvalid. It changes nothing.
func (m *Manager) plan(doc *Document, lim *limits) ([]plan, error) {
	var plans []plan
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(doc.Groups)) {
		g, exists := m.reg.Group(name)
		base, known := m.baselines[name]
		if !known && exists {
			base = g.Config()
		}
		rule := doc.Groups[name]
		cfg, err := rule.config(name, base, lim)
		switch {
		case err == nil && !exists && name == "":
			err = errors.New("a group name must not be empty")
		case err == nil && !exists:
			err = cfg.Validate()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: group %q: %w", ErrInvalid, name, err))
			continue
		}
		if exists {
			cfg = keepWarmUps(g, cfg, &rule)
			if err := g.CheckReconfigure(cfg); err != nil {
				errs = append(errs, fmt.Errorf("%w: %w", ErrInvalid, err)) // it names the group
				continue
			}
		}
		plans = append(plans, plan{name, g, cfg})
	}
	for _, name := range slices.Sorted(maps.Keys(m.named)) {
		if _, still := doc.Groups[name]; still {
			continue
		}
		if g, exists := m.reg.Group(name); exists {
			base := keepWarmUps(g, m.baselines[name], nil)
			if err := g.CheckReconfigure(base); err != nil {
				errs = append(errs, fmt.Errorf("%w: dropped from the document, back to its baseline: %w", ErrInvalid, err))
				continue
			}
			plans = append(plans, plan{name, g, base})
		}
	}
	return plans, errors.Join(errs...)
}

// create creates the groups plans create, and records their baselines. If
// the registry refuses one, it closes those it created and returns the
// error: then nothing changed.
func (m *Manager) create(plans []plan) error {
	var created []*command.Group
	for _, p := range plans {
		if p.group != nil {
			continue
		}
		g, err := m.reg.NewGroup(p.name, p.cfg)
		if err != nil {
			errs := []error{fmt.Errorf("rules: group %q not created, no group changed: %w", p.name, err)}
			for _, c := range created {
				errs = append(errs, c.Close(context.Background()))
			}
			return errors.Join(errs...)
		}
		created = append(created, g)
	}
	for _, g := range created {
		if _, known := m.baselines[g.Name()]; known { // created by the rules before, then closed by code
			continue
		}
		// The zero config, but for what cannot change live: the strategy
		// and the breakers' warm-up.
		cfg := g.Config()
		base := command.GroupConfig{Strategy: cfg.Strategy}
		base.Breaker.WarmUp, base.CommandBreaker.WarmUp = cfg.Breaker.WarmUp, cfg.CommandBreaker.WarmUp
		m.baselines[g.Name()] = base
	}
	return nil
}

// keepWarmUps returns cfg, given to g by rule r (nil: by no rule, the
// baseline), where each declared command of g keeps the warm-up its breaker
// runs with unless r sets that warm-up. A breaker's warm-up counts from its
// creation and cannot change (Reconfigure refuses it), so a document that
// no longer says it (drops the command's breaker rule, the command or the
// group) keeps it rather than being refused. A command left to the
// CommandBreaker template then gets the template's settings as its own
// breaker, with its warm-up.
func keepWarmUps(g *command.Group, cfg command.GroupConfig, r *Group) command.GroupConfig {
	for _, name := range slices.Sorted(maps.Keys(g.Config().Commands)) {
		b, running := g.CommandBreaker(name)
		if !running {
			continue
		}
		warmUp := b.Config().WarmUp
		cc := cfg.Commands[name]
		own, set := cc.Breaker, false
		if r != nil {
			if cr, ok := r.Commands[name]; ok && cr.Breaker != nil {
				set = cr.Breaker.WarmUp != nil
			} else if own == nil {
				set = r.CommandBreaker != nil && r.CommandBreaker.WarmUp != nil
			}
		}
		if own == nil {
			own = &cfg.CommandBreaker
		}
		if set || own.WarmUp == warmUp {
			continue
		}
		kept := *own
		kept.WarmUp = warmUp
		cc.Breaker = &kept
		cfg.Commands = maps.Clone(cfg.Commands)
		if cfg.Commands == nil {
			cfg.Commands = map[string]command.CommandConfig{}
		}
		cfg.Commands[name] = cc
	}
	return cfg
}

// Status tells how the documents fared: how many were applied, and the
// error of the last one tried (nil if it was applied).
func (m *Manager) Status() (applied int, lastErr error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.applied, m.lastErr
}

// LoadFile reads the rules file at path and applies it; see ApplyJSON. A
// path that names no regular file (ErrNotRegular) or a file over
// MaxFileSize is refused.
func (m *Manager) LoadFile(path string) error {
	data, _, err := readFile(path)
	if err != nil {
		return fmt.Errorf("rules: %w", err)
	}
	if err := m.ApplyJSON(data); err != nil {
		return fmt.Errorf("rules file %s: %w", path, err)
	}
	return nil
}

// Watch reads the rules file at path every interval (DefaultInterval if
// zero or less) and applies it whenever its contents change, until ctx
// ends; it then returns nil. It first applies the file as it is, unless it
// is the document last applied (by LoadFile, say), and returns that error
// if it cannot (a program should not start on a bad rules file); the file
// must be a regular one (ErrNotRegular) of at most MaxFileSize bytes.
//
// Later, a file that cannot be read is logged at Error level once per
// episode (again when the error changes), and at Info level once it reads
// again; a file that cannot be applied is logged at Error level with its
// error (line and field), once per content. Either way the rules in force
// stay until a good file comes. A poll reads the file only if its stat
// moved (another file renamed in its place, another size or modification
// time, or a modification less than 2 s before the last read, which a
// filesystem's coarse timestamps could hide), and applies it only if its
// contents changed (by SHA-256): an unchanged file costs a stat. A tool
// that rewrites the file in place with the same size and sets its
// modification time back is not noticed: write a new file and rename it
// over the old one, as editors and configuration tools do. Run it on a
// goroutine of its own.
func (m *Manager) Watch(ctx context.Context, path string, interval time.Duration) error {
	if interval <= 0 {
		interval = DefaultInterval
	}
	data, fi, err := readFile(path)
	if err != nil {
		return fmt.Errorf("rules: %w", err)
	}
	last := stamp{info: fi, sum: sha256.Sum256(data), readAt: time.Now()}
	m.mu.Lock()
	fresh := last.sum != m.lastSum
	m.mu.Unlock()
	if fresh {
		if err := m.ApplyJSON(data); err != nil {
			return fmt.Errorf("rules file %s: %w", path, err)
		}
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var failing string // the episode under way (see episode); "" while the file reads
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		fi, err := os.Stat(path)
		if err == nil && failing == "" && last.unchanged(fi) {
			continue
		}
		var data []byte
		if err == nil {
			data, fi, err = readFile(path)
		}
		if err != nil {
			if e := episode(err); e != failing {
				failing = e
				m.logger.Error("bulwark: rules file unreadable; rules in force kept", slog.String("path", path), slog.Any("error", err))
			}
			continue
		}
		if failing != "" {
			failing = ""
			m.logger.Info("bulwark: rules file readable again", slog.String("path", path))
		}
		prev := last.sum
		last = stamp{info: fi, sum: sha256.Sum256(data), readAt: time.Now()}
		if last.sum == prev {
			continue
		}
		if err := m.ApplyJSON(data); err != nil {
			m.logger.Error("bulwark: rules file rejected; rules in force kept", slog.String("path", path), slog.Any("error", err))
		}
	}
}

// episode names the trouble a read error of the watched file is: the error
// without the operation and path that met it, when it has them. A file
// removed between one poll's stat and its open fails the open, and the
// next poll's stat, with the same "no such file or directory": one episode,
// logged once.
func episode(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
