package circuit

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/bulwark-go/bulwark/internal/confdiff"
	"github.com/bulwark-go/bulwark/metrics"
)

// settings is what a breaker derives from its effective Config. Reconfigure
// replaces it whole with one atomic store: a decision loads it once and sees
// one configuration. The closed fast path of Allow does not read it.
type settings struct {
	Config                      // effective: defaults applied
	window     *metrics.Rolling // the health window
	slowOn     bool             // slow-call detection is on
	backoff    float64          // open-duration multiplier, at least 1
	generation uint64           // accepted Reconfigure calls so far
}

// cfg returns the settings in force.
func (b *Breaker) cfg() *settings { return b.settings.Load() }

// derive returns the settings of effective config eff with window w.
func (b *Breaker) derive(eff Config, w *metrics.Rolling) *settings {
	return &settings{
		Config:  eff,
		window:  w,
		slowOn:  eff.SlowCallDuration > 0,
		backoff: max(eff.BackoffMultiplier, 1),
	}
}

// CheckReconfigure reports whether Reconfigure would accept cfg, without
// changing anything. The error wraps ErrInvalidConfig and names the field.
func (b *Breaker) CheckReconfigure(cfg Config) error {
	_, err := b.effective(cfg)
	return err
}

// effective returns cfg as Reconfigure would apply it: validated, with the
// fields that keep their value filled in from the settings in force.
func (b *Breaker) effective(cfg Config) (Config, error) {
	cur := b.cfg().Config
	if cfg.Name == "" {
		cfg.Name = cur.Name
	}
	if cfg.Clock == nil {
		cfg.Clock = cur.Clock
	}
	if cfg.Logger == nil {
		cfg.Logger = cur.Logger
	}
	if cfg.OnTransition == nil {
		cfg.OnTransition = cur.OnTransition
	}
	switch {
	case cfg.Name != cur.Name:
		return Config{}, invalid("Name %q cannot change live (the breaker is %q)", cfg.Name, cur.Name)
	case cfg.Clock != cur.Clock:
		return Config{}, invalid("Clock cannot change live")
	case cfg.Mode != cur.Mode:
		return Config{}, invalid("Mode %v differs from the initial mode %v: Reconfigure keeps the mode, use SetMode",
			cfg.Mode, cur.Mode)
	case cfg.WarmUp != cur.WarmUp:
		return Config{}, invalid("WarmUp %v differs from %v: it counts from the breaker's creation, use WarmUp(d) to start a warm-up now",
			cfg.WarmUp, cur.WarmUp)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg.WithDefaults(), nil
}

// Reconfigure replaces the breaker's configuration while it runs. It
// validates cfg first: an invalid cfg returns an error wrapping
// ErrInvalidConfig, naming the field, and changes nothing. An accepted cfg
// takes effect for the next decision (admission, outcome or transition) and
// is counted in Snapshot.ConfigGeneration; if it changes any field, it is
// logged at Info level with each changed field, old -> new.
//
// What stays: the state, the mode and the state's deadlines (an open breaker
// turns half-open when its current open period ends; the new OpenDuration
// applies from the next opening), the probes in flight and the transition
// history. A zero Name, Clock, Logger or OnTransition keeps the current one;
// a different Name or Clock is refused, and so is a Mode other than the
// initial mode (Config().Mode): change the mode with SetMode. The window is
// kept, counts and all, while its shape (Window.Length and Buckets, after
// defaults) is unchanged; a new shape starts a new, empty window, so the
// breaker needs MinRequests fresh outcomes before it can trip again, and
// outcomes of calls admitted before are recorded in the new window. The
// backed-off open duration is reset to the new OpenDuration if it was not
// backed off, else kept within [OpenDuration, MaxOpenDuration]. WarmUp
// counts from the breaker's creation, so a different WarmUp is refused:
// Breaker.WarmUp starts a warm-up now. HealthCheck and RampFunc are
// replaced like any field (nil turns them off); a health check added live
// starts with the next opening.
//
// Reconfigure takes the breaker's lock (as SetMode does), never the lock
// of a call: Allow on a closed breaker reads only the state word, before
// and after.
func (b *Breaker) Reconfigure(cfg Config) error {
	eff, err := b.effective(cfg)
	if err != nil {
		return err
	}
	b.mu.Lock()
	old := b.cfg()
	window := old.window
	if eff.Window != old.Window {
		if window, err = metrics.NewRolling(eff.Window, metrics.CountsOnly); err != nil {
			b.mu.Unlock()
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err) // Validate checked the window: unreachable
		}
	}
	next := b.derive(eff, window)
	next.generation = old.generation + 1
	if b.openFor == old.OpenDuration {
		b.openFor = eff.OpenDuration
	} else {
		b.openFor = min(max(b.openFor, eff.OpenDuration), eff.MaxOpenDuration)
	}
	b.settings.Store(next)
	b.mu.Unlock()

	if changes := confdiff.Diff(old.Config, eff); len(changes) > 0 {
		attrs := append([]slog.Attr{slog.String("breaker", eff.Name), slog.Uint64("generation", next.generation)}, changes...)
		eff.Logger.LogAttrs(context.Background(), slog.LevelInfo, "circuit breaker reconfigured", attrs...)
	}
	return nil
}
