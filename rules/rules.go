package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/priority"
	"github.com/bulwark-go/bulwark/command/retry"
)

// ErrInvalid is wrapped by every error about a rules document: its syntax,
// an unknown field, a bad value or a config a group refuses.
var ErrInvalid = errors.New("rules: invalid")

// Document is a parsed rules document.
type Document struct {
	Groups map[string]Group `json:"groups"`
}

// Group is the rule of one group. Every field is optional: a nil field keeps
// the base's value (see the package doc).
type Group struct {
	Preset          string             `json:"preset"`
	Strategy        *string            `json:"strategy"`
	MaxConcurrent   *int               `json:"maxConcurrent" rules:"nonzero"`
	QueueSize       *int               `json:"queueSize"`
	Timeout         *Timeout           `json:"timeout" rules:"nonzero"`
	FallbackLimit   *int               `json:"fallbackLimit" rules:"nonzero"`
	MaxCommands     *int               `json:"maxCommands" rules:"nonzero"`
	NoFallback      *bool              `json:"noFallback"`
	ReadOnly        *bool              `json:"readOnly"`
	DeadlineReserve *Duration          `json:"deadlineReserve"`
	Retry           *Retry             `json:"retry"`
	Throttle        *Throttle          `json:"throttle"`
	Priority        *Priority          `json:"priority"`
	RateLimit       *RateLimit         `json:"rateLimit"`
	KeyedRateLimit  *KeyedRateLimit    `json:"keyedRateLimit"`
	Breaker         *Breaker           `json:"breaker"`
	CommandBreaker  *Breaker           `json:"commandBreaker"`
	Commands        map[string]Command `json:"commands"`
}

// Command is the rule of one command of a group.
type Command struct {
	Timeout   *Timeout   `json:"timeout" rules:"nonzero"`
	Breaker   *Breaker   `json:"breaker"`
	RateLimit *RateLimit `json:"rateLimit"`
}

// Throttle overrides the fields of a throttle.Config it sets. Rand
// is code's: it comes from the base.
type Throttle struct {
	K *float64 `json:"k"`
}

// Priority overrides the fields of a priority.Config it sets:
// reserve, the four shares [P0, P1, P2, P3], and default, the priority of a
// call that gives none, written "P0" to "P3".
type Priority struct {
	Reserve []float64 `json:"reserve"`
	Default *string   `json:"default"`
}

// apply sets the fields of cfg that p sets; the error names the field.
func (p *Priority) apply(cfg *priority.Config) error {
	if p == nil {
		return nil
	}
	if p.Reserve != nil {
		// A JSON array into a Go array would drop a fifth share silently.
		if len(p.Reserve) != len(cfg.Reserve) {
			return fmt.Errorf("priority.reserve has %d shares: want %d, one for each of P0 to P3", len(p.Reserve), len(cfg.Reserve))
		}
		copy(cfg.Reserve[:], p.Reserve)
	}
	if p.Default == nil {
		return nil
	}
	for q := priority.P0; q <= priority.P3; q++ {
		if *p.Default == q.String() {
			cfg.Default = q
			return nil
		}
	}
	return fmt.Errorf("priority.default %q: want \"P0\", \"P1\", \"P2\" or \"P3\"", *p.Default)
}

// Retry overrides the fields of a retry.Config it sets. Sleep, Rand
// and NoBudget are code's: they come from the base.
type Retry struct {
	MaxAttempts        *int      `json:"maxAttempts"`
	Backoff            *Duration `json:"backoff" rules:"nonzero"`
	MaxBackoff         *Duration `json:"maxBackoff" rules:"nonzero"`
	MaxRetryAfter      *Duration `json:"maxRetryAfter" rules:"nonzero"`
	BudgetRatio        *float64  `json:"budgetRatio" rules:"nonzero"`
	BudgetMinPerSecond *float64  `json:"budgetMinPerSecond" rules:"nonzero"`
}

// Breaker overrides the fields of a circuit.Config it sets. The fields
// that circuit.Config groups by a prefix are objects here: open sets the
// Open fields, halfOpen the HalfOpen fields, ramp the Ramp fields.
type Breaker struct {
	Window           *Window   `json:"window"`
	MinRequests      *int      `json:"minRequests" rules:"nonzero"`
	FailureRatio     *float64  `json:"failureRatio" rules:"nonzero"`
	SlowCallDuration *Duration `json:"slowCallDuration"`
	SlowCallRatio    *float64  `json:"slowCallRatio"`
	Confidence       *float64  `json:"confidence"`
	Open             *Open     `json:"open"`
	HalfOpen         *HalfOpen `json:"halfOpen"`
	Ramp             *Ramp     `json:"ramp"`
	WarmUp           *Duration `json:"warmUp"`
}

// Open overrides the circuit.Config fields OpenDuration, OpenBackoff and
// OpenMaxDuration it sets.
type Open struct {
	Duration *Duration `json:"duration" rules:"nonzero"`
	Backoff  *float64  `json:"backoff"`
	Max      *Duration `json:"max" rules:"nonzero"`
}

// HalfOpen overrides the circuit.Config fields HalfOpenProbes,
// HalfOpenSuccesses and HalfOpenMaxWait it sets.
type HalfOpen struct {
	Probes    *int      `json:"probes" rules:"nonzero"`
	Successes *int      `json:"successes" rules:"nonzero"`
	MaxWait   *Duration `json:"maxWait" rules:"nonzero"`
}

// Ramp overrides the circuit.Config fields RampDuration and RampFloor it
// sets.
type Ramp struct {
	Duration *Duration `json:"duration"`
	Floor    *float64  `json:"floor" rules:"nonzero"`
}

// Window is a rolling window's shape.
type Window struct {
	Length  *Duration `json:"length" rules:"nonzero"`
	Buckets *int      `json:"buckets" rules:"nonzero"`
}

// Duration is a duration written as a Go duration string ("80ms").
type Duration time.Duration

// UnmarshalJSON parses a duration string. It refuses any other value with
// a *json.UnmarshalTypeError whose Value is b, which the decoder completes
// with the field and Parse locates and explains (see parseDuration).
func (d *Duration) UnmarshalJSON(b []byte) error {
	v, err := parseDuration(b)
	if err != nil {
		return &json.UnmarshalTypeError{Value: string(b), Type: reflect.TypeFor[Duration]()}
	}
	*d = Duration(v)
	return nil
}

// parseDuration returns the duration the JSON value b writes, or an error
// saying how durations are written.
func parseDuration(b []byte) (time.Duration, error) {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return 0, fmt.Errorf(`a duration is a string such as "250ms", not %s`, kindOf(b))
	}
	if s == "none" {
		return 0, errors.New(`"none" is only for a timeout: write a duration such as "250ms"`)
	}
	return time.ParseDuration(s)
}

// kindOf names the kind of JSON value b, which json.Unmarshal refused to
// read as a string (so not a string nor null), with its article.
func kindOf(b []byte) string {
	switch b[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a bool"
	}
	return "a number"
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(time.Duration(d).String())), nil
}

// Timeout is a timeout: a Duration, or "none" for command.NoTimeout (no
// timeout).
type Timeout Duration

// UnmarshalJSON parses "none" or a duration string.
func (t *Timeout) UnmarshalJSON(b []byte) error {
	if string(b) == `"none"` {
		*t = Timeout(command.NoTimeout)
		return nil
	}
	return (*Duration)(t).UnmarshalJSON(b)
}

// MarshalJSON writes the timeout as "none" or a duration string.
func (t Timeout) MarshalJSON() ([]byte, error) {
	if time.Duration(t) == command.NoTimeout {
		return []byte(`"none"`), nil
	}
	return Duration(t).MarshalJSON()
}

// config returns the GroupConfig rule r gives the group called name whose
// baseline is base, its limiters built by lim. The error names the group's
// field.
func (r Group) config(name string, base command.GroupConfig, lim *limits) (command.GroupConfig, error) {
	cfg := base
	if r.Preset != "" {
		p, err := command.Preset(r.Preset)
		if err != nil {
			return cfg, fmt.Errorf("preset: %w", err)
		}
		cfg = keepCode(p, base)
	}
	if r.Strategy != nil {
		switch *r.Strategy {
		case "thread":
			cfg.Strategy = command.Thread
		case "semaphore":
			cfg.Strategy = command.Semaphore
		default:
			return cfg, fmt.Errorf("strategy %q: want \"thread\" or \"semaphore\"", *r.Strategy)
		}
	}
	set(&cfg.MaxConcurrent, r.MaxConcurrent)
	set(&cfg.QueueSize, r.QueueSize)
	setDuration(&cfg.Timeout, r.Timeout)
	set(&cfg.FallbackLimit, r.FallbackLimit)
	set(&cfg.MaxCommands, r.MaxCommands)
	set(&cfg.NoFallback, r.NoFallback)
	set(&cfg.ReadOnly, r.ReadOnly)
	setDuration(&cfg.DeadlineReserve, r.DeadlineReserve)
	r.Retry.apply(&cfg.Retry)
	if r.Throttle != nil {
		set(&cfg.Throttle.K, r.Throttle.K)
	}
	if err := r.Priority.apply(&cfg.Priority); err != nil {
		return cfg, err
	}
	r.Breaker.apply(&cfg.Breaker)
	r.CommandBreaker.apply(&cfg.CommandBreaker)
	if r.RateLimit != nil {
		l, err := lim.limiter(limitSlot{group: name}, r.RateLimit)
		if err != nil {
			return cfg, fmt.Errorf("rateLimit: %w", err)
		}
		cfg.RateLimit = l
	}
	if r.KeyedRateLimit != nil {
		l, err := lim.keyed(limitSlot{group: name, keyed: true}, r.KeyedRateLimit)
		if err != nil {
			return cfg, fmt.Errorf("keyedRateLimit: %w", err)
		}
		cfg.KeyedRateLimit = l
	}
	if len(r.Commands) > 0 {
		cfg.Commands = maps.Clone(cfg.Commands)
		if cfg.Commands == nil {
			cfg.Commands = map[string]command.CommandConfig{}
		}
		for _, cmd := range slices.Sorted(maps.Keys(r.Commands)) {
			cc, err := r.Commands[cmd].config(cfg.Commands[cmd], limitSlot{group: name, command: cmd}, lim)
			if err != nil {
				return cfg, fmt.Errorf("commands[%q].%w", cmd, err)
			}
			cfg.Commands[cmd] = cc
		}
	}
	return cfg, nil
}

// keepCode returns preset p with what only code can set, and what cannot
// change live (the strategy, the metrics window and the alerts), taken from
// the baseline base. Limiters set in code are kept too: a preset names
// thresholds, not quotas.
func keepCode(p, base command.GroupConfig) command.GroupConfig {
	p.Strategy = base.Strategy
	p.Window = base.Window
	p.IsBadRequest = base.IsBadRequest
	p.ProbeClassifier = base.ProbeClassifier
	p.Alerts = base.Alerts
	p.RateLimit, p.KeyedRateLimit = base.RateLimit, base.KeyedRateLimit
	p.Retry.Sleep, p.Retry.Rand, p.Retry.NoBudget = base.Retry.Sleep, base.Retry.Rand, base.Retry.NoBudget
	for _, b := range []struct{ to, from *circuit.Config }{{&p.Breaker, &base.Breaker}, {&p.CommandBreaker, &base.CommandBreaker}} {
		b.to.Clock, b.to.Logger, b.to.OnTransition, b.to.Mode = b.from.Clock, b.from.Logger, b.from.OnTransition, b.from.Mode
	}
	return p
}

// config returns the CommandConfig rule c gives a command whose settings
// were cc, its limiter built by lim for slot. The error names the field.
func (c Command) config(cc command.CommandConfig, slot limitSlot, lim *limits) (command.CommandConfig, error) {
	setDuration(&cc.Timeout, c.Timeout)
	if c.Breaker != nil {
		var b circuit.Config
		if cc.Breaker != nil {
			b = *cc.Breaker
		}
		c.Breaker.apply(&b)
		cc.Breaker = &b
	}
	if c.RateLimit != nil {
		l, err := lim.limiter(slot, c.RateLimit)
		if err != nil {
			return cc, fmt.Errorf("rateLimit: %w", err)
		}
		cc.RateLimit = l
	}
	return cc, nil
}

// apply overrides the fields of c that r sets. A nil r sets none.
func (r *Retry) apply(c *retry.Config) {
	if r == nil {
		return
	}
	set(&c.MaxAttempts, r.MaxAttempts)
	setDuration(&c.Backoff, r.Backoff)
	setDuration(&c.MaxBackoff, r.MaxBackoff)
	setDuration(&c.MaxRetryAfter, r.MaxRetryAfter)
	set(&c.BudgetRatio, r.BudgetRatio)
	set(&c.BudgetMinPerSecond, r.BudgetMinPerSecond)
}

// apply overrides the fields of c that b sets. A nil b sets none.
func (b *Breaker) apply(c *circuit.Config) {
	if b == nil {
		return
	}
	if b.Window != nil {
		if b.Window.Length != nil {
			c.Window.Length = time.Duration(*b.Window.Length)
		}
		set(&c.Window.Buckets, b.Window.Buckets)
	}
	set(&c.MinRequests, b.MinRequests)
	set(&c.FailureRatio, b.FailureRatio)
	setDuration(&c.SlowCallDuration, b.SlowCallDuration)
	set(&c.SlowCallRatio, b.SlowCallRatio)
	set(&c.Confidence, b.Confidence)
	if o := b.Open; o != nil {
		setDuration(&c.OpenDuration, o.Duration)
		set(&c.OpenBackoff, o.Backoff)
		setDuration(&c.OpenMaxDuration, o.Max)
	}
	if h := b.HalfOpen; h != nil {
		set(&c.HalfOpenProbes, h.Probes)
		set(&c.HalfOpenSuccesses, h.Successes)
		setDuration(&c.HalfOpenMaxWait, h.MaxWait)
	}
	if r := b.Ramp; r != nil {
		setDuration(&c.RampDuration, r.Duration)
		set(&c.RampFloor, r.Floor)
	}
	setDuration(&c.WarmUp, b.WarmUp)
}

func set[T any](to *T, v *T) {
	if v != nil {
		*to = *v
	}
}

func setDuration[D Duration | Timeout](to *time.Duration, v *D) {
	if v != nil {
		*to = time.Duration(*v)
	}
}
