package circuit

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/bulwark-go/bulwark/internal/breaker"
	"github.com/bulwark-go/bulwark/internal/confdiff"
	"github.com/bulwark-go/bulwark/metrics"
)

// ErrOpen is the error of every refusal: errors.Is(err, ErrOpen) holds for
// each error Allow returns. The message says why: open, forced open
// (ForcedOpen mode), half-open with every probe slot taken, or shed during
// a ramp-up; Snapshot tells the state and mode.
var ErrOpen = breaker.ErrOpen

// Breaker is a circuit breaker. Create one with New. A Breaker is safe for
// concurrent use; Allow and Permit.Record take no lock and allocate nothing
// while it is closed.
type Breaker breaker.Breaker

// engine returns b as the engine it is (package internal/breaker).
func (b *Breaker) engine() *breaker.Breaker { return (*breaker.Breaker)(b) }

// New returns a breaker for cfg, or an error wrapping ErrInvalidConfig that
// names the first invalid field. The breaker starts closed (open in
// ForcedOpen mode) with an empty window. A valid configuration that breaks
// one of the anti-pattern rules is accepted and logged on Logger at Warn
// level, one record per rule, with the attributes breaker and rule:
// "open_too_short" (OpenDuration of 100 ms or less: it probes the sick
// dependency as if there were no breaker), "min_requests_one" (MinRequests
// 1 trips on one failure and never settles at a low rate) or
// "half_open_flood" (HalfOpenProbes above 10 lets a half-open breaker
// admit about everything).
func New(cfg Config) (*Breaker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	eff := cfg.withDefaults()
	b, err := breaker.New(eff.settings())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err) // Validate checked the window: unreachable
	}
	eff.warnAntiPatterns()
	return (*Breaker)(b), nil
}

// Permit is the breaker's admission of one call. It is a small value; pass
// it along and call Record exactly once when the call ends. It remembers the
// state generation that issued it: if the breaker has changed state since,
// the outcome is stale and not counted (a closed-state call that ends after
// the breaker opened is not a probe result). The zero Permit records
// nothing.
type Permit breaker.Permit

// Record reports how the permitted call went, as its primary outcome, and
// how long it took. Call it exactly once per permit; a second call may be
// counted again. Only metrics.Success, metrics.Failure and metrics.Timeout
// count (the calls that reached the dependency); any other event, such as
// metrics.Cancelled or metrics.BadRequest, releases the permit (and its
// probe slot) without counting. A success slower than SlowCallDuration is
// a slow call. Outcomes of a stale permit, of a call during warm-up, and
// of an ObserveOnly call the breaker would have refused are not counted.
// Record does not allocate and, while the breaker is closed, takes no lock
// unless the outcome trips it (a half-open probe's Record takes it). It
// reads the clock once when the outcome counts.
func (p Permit) Record(o metrics.Event, latency time.Duration) { breaker.Permit(p).Record(o, latency) }

// Allow asks to make one call. It returns a Permit to Record the outcome on,
// or a refusal matching ErrOpen (open, forced open, half-open with all probe
// slots in flight, or shed during ramp-up; the message says which). In
// ObserveOnly mode it never refuses. It does not block; an open breaker
// whose open duration has elapsed turns half-open here, and this call
// becomes its first probe. Allow does not allocate, and reads
// the clock only when the breaker is not simply closed (open, half-open or
// ramping up).
func (b *Breaker) Allow() (Permit, error) {
	p, err := b.engine().Allow()
	return Permit(p), err
}

// State returns the effective state, after applying any transition that time
// alone has made due (open → half-open, half-open timeout).
func (b *Breaker) State() State { return State(b.engine().State()) }

// SetMode switches the mode at run time. ForcedOpen and ForcedClosed pin the
// effective state (open or closed) and stop the state machine; leaving a
// forced mode for Normal or ObserveOnly restarts it closed, with an empty
// window (outcomes counted while forced closed are dropped, and a call
// admitted then that ends later is not counted). Leaving ForcedOpen starts a
// ramp-up if RampDuration is set; leaving ForcedClosed does not (calls were
// flowing). Switching between Normal and ObserveOnly keeps the current state.
// When the effective state changes, a transition with reason "forced" is
// reported. An unknown mode is ignored.
func (b *Breaker) SetMode(m Mode) { b.engine().SetMode(breaker.Mode(m)) }

// Reset restarts the breaker closed, as if new, in one transition with
// reason reset: the window is cleared, the open duration goes back to
// OpenDuration, half-open progress is dropped and permits issued before
// are stale. A forced mode is left for Normal; Normal and ObserveOnly stay.
// No ramp-up starts (an operator has judged the dependency healthy), and a
// warm-up in progress goes on. The transition is reported from whatever
// state the breaker was in, closed included, so that every reset shows in
// the log and the history.
func (b *Breaker) Reset() { b.engine().Reset() }

// WarmUp starts a warm-up of d from now: outcomes recorded before now+d
// are not counted (neither in the window nor as probe results), so cold
// instances behind the dependency cannot trip the breaker. It replaces
// any warm-up in progress, whether from Config.WarmUp or an earlier call:
// a deploy or service-discovery hook calls it each time new instances
// come in, and WarmUp(0) ends a warm-up at once. It changes no state: an
// open breaker stays open. Snapshot reports WarmUpLeft. A negative d is an
// error wrapping ErrInvalidConfig, and changes nothing. docs/policies.md
// tells the incident it prevents.
func (b *Breaker) WarmUp(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: WarmUp %v must not be negative", ErrInvalidConfig, d)
	}
	b.engine().WarmUp(d)
	return nil
}

// Observe adds f to the functions called with every transition reported
// from now on, and returns stop, which removes it (calling stop again does
// nothing). Observers are called in the order they were added, after the
// transition is logged and before Config.OnTransition, under the same
// rules: in order, never concurrently with themselves, never under the
// breaker's lock (they may call the breaker's methods, stop included), a
// panic recovered and logged at Error level. f should not block: the next
// transitions wait for it. A nil f adds nothing.
func (b *Breaker) Observe(f func(Transition)) (stop func()) {
	if f == nil {
		return func() {}
	}
	return b.engine().Observe(func(t breaker.Transition) { f(transitionOf(t)) })
}

// Config returns the effective configuration (defaults applied), as of the
// last Reconfigure. Its Mode is the initial mode; Snapshot tells the
// current one.
func (b *Breaker) Config() Config { return configOf(b.engine().Settings()) }

// configOf returns the Config that s was derived from (see settings).
func configOf(s breaker.Settings) Config { return s.Config.(*source).cfg }

// Reconfigure replaces the breaker's configuration while it runs. It
// validates cfg first: an invalid cfg returns an error wrapping
// ErrInvalidConfig, naming the field, and changes nothing. An accepted cfg
// takes effect for the next decision (admission, outcome or transition);
// if it changes any field, it is logged at Info level with each changed
// field, old -> new, and the count of accepted Reconfigure calls
// (generation).
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
// backed off, else kept within [OpenDuration, OpenMaxDuration]. WarmUp counts
// from the breaker's creation, so a different WarmUp is refused:
// Breaker.WarmUp starts a warm-up now. RampFunc is replaced like any
// field (nil turns it off).
//
// Reconfigure takes the breaker's lock (as SetMode does), never the lock
// of a call: Allow on a closed breaker reads only the state word, before
// and after.
func (b *Breaker) Reconfigure(cfg Config) error {
	eff, err := b.Config().replacement(cfg)
	if err != nil {
		return err
	}
	old, gen, err := b.engine().Reconfigure(eff.settings())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err) // Validate checked the window: unreachable
	}
	if changes := confdiff.Diff(configOf(old), eff); len(changes) > 0 {
		attrs := append([]slog.Attr{slog.String("breaker", eff.Name), slog.Uint64("generation", gen)}, changes...)
		eff.Logger.LogAttrs(context.Background(), slog.LevelInfo, "circuit breaker reconfigured", attrs...)
	}
	return nil
}

// replacement returns cfg as Reconfigure would apply it in place of cur,
// the configuration in force: validated, with the fields that keep their
// value filled in from cur, and defaults applied.
func (cur Config) replacement(cfg Config) (Config, error) {
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
	return cfg.withDefaults(), nil
}
