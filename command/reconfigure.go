package command

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command/hedge"
	"github.com/bulwark-go/bulwark/command/priority"
	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/internal/confdiff"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/ratelimit"
)

// liveConfig is a group's effective config with its generation: what
// Reconfigure replaces whole.
type liveConfig struct {
	GroupConfig
	generation uint64        // accepted Reconfigure calls so far
	changed    time.Duration // group clock reading of the last change (or creation)
	throttle   *throttler    // the client-side throttle; nil: off
}

// commandSettings are the settings a call of one command reads: derived
// from the group's config and the command's CommandConfig, replaced whole
// by Reconfigure.
type commandSettings struct {
	timeout  time.Duration // default timeout of a call
	slowCall time.Duration // a success slower than this also emits SLOW; 0: off
	reserve  time.Duration // the group's DeadlineReserve; 0: off

	probeClassifier func(err error) metrics.Event // judges failed probes; nil: as any call

	// The call's rate limiters, asked in this order (see call.passLimits);
	// limited is set when there is any, or any other refusal the limit
	// stage makes (read-only, instance warm-up, throttle, priority
	// shedding), so that a call with none of them tests one flag;
	// limitWaits is set when a limiter may wait (see limitStage).
	groupLimit limitStage
	keyedLimit ratelimit.KeyedLimiter
	limit      limitStage
	limited    bool
	limitWaits bool

	retry      *retry.Config    // the group's Retry, defaults applied; nil: off
	priority   *priority.Config // the group's Priority; nil: no priority shedding
	noFallback bool             // the group's NoFallback
	readOnly   bool             // the group is read-only (GroupConfig.ReadOnly or its registry's switch); sets limited

	instanceWarmUp time.Duration  // the group's InstanceWarmUp; 0: off; sets limited
	coalesce       bool           // the command's Coalesce
	hedge          *hedge.Config  // the command's Hedge, defaults applied; nil: off; sets limited
	throttle       *throttler     // the group's client-side throttle; nil: off
	adaptive       *adaptiveLimit // the group's adaptive concurrency limit; nil: off; sets limited
}

// cfg returns the group's config in force.
func (g *Group) cfg() *liveConfig { return g.live.Load() }

// commandSettings returns the settings of the command called name under c,
// in a group whose clock is clock and whose registry is read-only or not.
func (c *GroupConfig) commandSettings(name string, clock metrics.Clock, readOnly bool) *commandSettings {
	s := &commandSettings{timeout: c.Timeout, slowCall: c.CommandBreaker.SlowCallDuration, reserve: c.DeadlineReserve,
		probeClassifier: c.ProbeClassifier, groupLimit: stageOf(c.RateLimit, clock), keyedLimit: c.KeyedRateLimit,
		noFallback: c.NoFallback}
	s.readOnly = c.ReadOnly || readOnly
	s.instanceWarmUp = c.InstanceWarmUp
	s.limited = c.RateLimit != nil || c.KeyedRateLimit != nil || s.readOnly || s.instanceWarmUp > 0
	s.limitWaits = mayWait(c.RateLimit) || mayWait(c.KeyedRateLimit)
	if retryOn(c.Retry) {
		s.retry = &c.Retry
	}
	if sheds(&c.Priority) {
		s.priority, s.limited = &c.Priority, true
	}
	cc, ok := c.Commands[name]
	if !ok {
		return s
	}
	if cc.RateLimit != nil {
		s.limit, s.limited = stageOf(cc.RateLimit, clock), true
		s.limitWaits = s.limitWaits || mayWait(cc.RateLimit)
	}
	if cc.ProbeClassifier != nil {
		s.probeClassifier = cc.ProbeClassifier
	}
	if cc.Timeout != 0 {
		s.timeout = cc.Timeout
	}
	if cc.Breaker != nil {
		s.slowCall = cc.Breaker.SlowCallDuration
	}
	s.coalesce = cc.Coalesce
	if hedgeOn(cc.Hedge) {
		h := hedgeDefaults(cc.Hedge)
		s.hedge, s.limited = &h, true
	}
	return s
}

// commandBreakerConfig returns the breaker config of the command called
// name under c: its own CommandConfig.Breaker (with the template's Clock,
// and its Logger and OnTransition unless set), or the CommandBreaker
// template.
func (g *Group) commandBreakerConfig(c *GroupConfig, name string) circuit.Config {
	bc := c.CommandBreaker
	if cc, ok := c.Commands[name]; ok && cc.Breaker != nil {
		own := *cc.Breaker
		own.Clock, own.Mode = bc.Clock, bc.Mode
		if own.Logger == nil {
			own.Logger = bc.Logger
		}
		if own.OnTransition == nil {
			own.OnTransition = bc.OnTransition
		}
		bc = own
	}
	return g.breakerConfig(bc, g.name+"/"+name)
}

// CheckReconfigure reports whether Reconfigure would accept cfg, without
// changing anything: the error is the one Reconfigure would return. A
// caller that changes several groups together checks them all first.
func (g *Group) CheckReconfigure(cfg GroupConfig) error {
	_, err := g.check(cfg)
	return err
}

// check validates cfg as a replacement of the group's config and returns
// it as it would be applied.
func (g *Group) check(cfg GroupConfig) (*liveConfig, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("group %q: %w", g.name, err)
	}
	cur := g.cfg()
	eff := cfg.withDefaults()
	if eff.Alerts == nil {
		eff.Alerts = cur.Alerts
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("group %q: %w: "+format, append([]any{g.name, ErrInvalidConfig}, args...)...)
	}
	switch {
	case g.closed.Load():
		return nil, fmt.Errorf("group %q: %w", g.name, ErrClosed)
	case eff.Strategy != cur.Strategy:
		return nil, bad("Strategy %v cannot change live (the group is %v): create a new group", eff.Strategy, cur.Strategy)
	case eff.Window != cur.Window:
		return nil, bad("Window {Length: %v, Buckets: %d} cannot change live (the metrics window is {%v, %d}); the breakers' windows can",
			eff.Window.Length, eff.Window.Buckets, cur.Window.Length, cur.Window.Buckets)
	case eff.Alerts != cur.Alerts:
		return nil, bad("Alerts cannot change live: create a new group")
	}
	if err := engine(g.breaker).CheckReconfigure(g.breakerConfig(eff.Breaker, g.name)); err != nil {
		return nil, bad("Breaker: %w", err)
	}
	for _, c := range g.commands.Load().names.byNameOrder() {
		name := c.name
		if err := engine(c.breaker).CheckReconfigure(g.commandBreakerConfig(&eff, name)); err != nil {
			return nil, bad("breaker of command %q: %w", name, err)
		}
	}
	return &liveConfig{GroupConfig: eff, generation: cur.generation + 1, changed: g.clock.Now()}, nil
}

// Reconfigure replaces the group's configuration while calls run. It
// validates cfg first (as NewGroup does, plus the checks below): a rejected
// cfg returns an error wrapping ErrInvalidConfig (ErrClosed after Close)
// that names the field, and changes nothing. An accepted cfg takes effect
// for the calls that start after Reconfigure returns; a call that starts
// meanwhile may see part of it. It is logged at Info level, with each
// changed field as old -> new, and counted in GroupSnapshot's
// ConfigGeneration.
//
// What changes live: MaxConcurrent and QueueSize (the bulkhead is resized:
// shrinking never stops running or queued work; new calls are refused until
// fewer than the new limit run, so once the excess finishes no more than
// the new limit ever run at once), Adaptive (a limit that stays on keeps
// its value and estimates, clamped into the new bounds; see
// package adaptive), Timeout, FallbackLimit (likewise),
// IsBadRequest, MaxCommands, Commands (a newly declared
// command is created at once; a command no longer declared reverts to the
// group's settings but keeps its metrics), and the breakers' settings
// (Breaker for the group's, CommandBreaker or Commands[name].Breaker for a
// command's; see circuit.Breaker.Reconfigure for what a breaker keeps).
// What cannot: Strategy (create a new group), Window (the metrics windows
// keep their shape; the breakers' own Window can change), Logger (nil keeps
// it), Alerts (nil keeps it), a breaker's
// Clock, Mode (use SetMode) or WarmUp (use Group.WarmUp). Reconfigure takes the
// group's lock, which only command creation and Close share: Execute of a
// known command never waits for it.
func (g *Group) Reconfigure(cfg GroupConfig) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reconfigureLocked(cfg)
}

// ReconfigureCommand replaces the settings of the command called name (see
// CommandConfig): Reconfigure with the group's config whose Commands[name]
// is cc. It creates the command if the group has none of that name.
func (g *Group) ReconfigureCommand(name string, cc CommandConfig) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	cfg := g.cfg().GroupConfig
	cfg.Commands = maps.Clone(cfg.Commands)
	if cfg.Commands == nil {
		cfg.Commands = map[string]CommandConfig{}
	}
	cfg.Commands[name] = cc
	return g.reconfigureLocked(cfg)
}

// reconfigureLocked is Reconfigure with g.mu held. Everything that can
// fail is checked before the first change; the bulkhead, the only part
// that could still refuse (once closed, which g.mu excludes), goes first.
func (g *Group) reconfigureLocked(cfg GroupConfig) error {
	next, err := g.check(cfg)
	if err != nil {
		return err
	}
	old := g.cfg()
	if err = g.adaptive.configure(&next.GroupConfig, next.changed); err != nil {
		return fmt.Errorf("group %q: %w", g.name, err)
	}
	must(g.fallback.Resize(next.FallbackLimit))
	must(g.breaker.Reconfigure(g.breakerConfig(next.Breaker, g.name)))
	next.throttle = g.throttlerOf(&next.GroupConfig)
	g.live.Store(next)
	g.declareLocked()
	for _, c := range g.commands.Load().names.all() {
		name := c.name
		must(c.breaker.Reconfigure(g.commandBreakerConfig(&next.GroupConfig, name)))
		c.settings.Store(next.settingsOf(g, name))
	}
	attrs := append([]slog.Attr{slog.String("group", g.name), slog.Uint64("generation", next.generation)},
		confdiff.Diff(old.GroupConfig, next.GroupConfig)...)
	g.logger.LogAttrs(context.Background(), slog.LevelInfo, "bulwark: group reconfigured", attrs...)
	return nil
}

// must panics on an error that validation has ruled out.
func must(err error) {
	if err != nil {
		panic(fmt.Sprintf("command: validated config refused: %v", err))
	}
}

// declareLocked creates the commands the config declares that the group
// does not have yet (declared commands are created whatever MaxCommands
// says: the config bounds them), and lets new names be created again if
// MaxCommands now leaves room. g.mu is held.
func (g *Group) declareLocked() {
	cfg := g.cfg()
	old := g.commands.Load()
	reopen := old.overflow != nil && old.names.len() < cfg.MaxCommands
	for _, name := range slices.Sorted(maps.Keys(cfg.Commands)) {
		if old.names.get(name) == nil {
			old.names.add(g.newCommand(name))
		}
	}
	if reopen {
		g.commands.Store(&commandTable{names: old.names, types: old.types})
	}
}
