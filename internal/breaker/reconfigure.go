package breaker

import (
	"log/slog"
	"math"
	"time"

	"github.com/bulwark-go/bulwark/internal/windowed"
	"github.com/bulwark-go/bulwark/metrics"
)

// Settings is what a breaker runs on: the effective configuration, defaults
// applied and validated, that package circuit derives from a
// circuit.Config (which documents every field). The engine trusts it.
type Settings struct {
	Name string

	// Closed: when to trip.
	Window           metrics.Window
	MinRequests      int
	FailureRatio     float64
	SlowCallDuration time.Duration // 0: slow-call detection off
	SlowCallRatio    float64
	Confidence       float64 // 0: the ratios trip as they are; else their Wilson lower bounds at this confidence do

	// Open: how long.
	OpenDuration    time.Duration
	Backoff         float64 // multiplies the open duration after a failed trial; at least 1
	MaxOpenDuration time.Duration

	// Half-open: the trial.
	HalfOpenProbes    int
	HalfOpenSuccesses int
	HalfOpenFailures  int
	HalfOpenMaxWait   time.Duration

	// After closing: the ramp-up (RampUp 0: off). The share rises linearly
	// from RampFloor, or doubles every RampDoubling, or follows RampFunc.
	RampUp       time.Duration
	RampFloor    float64
	RampDoubling time.Duration
	RampFunc     func(elapsed time.Duration) float64

	WarmUp       time.Duration
	Mode         Mode // the initial mode
	Clock        metrics.Clock
	Logger       *slog.Logger
	OnTransition func(Transition) // nil: none

	// Config is what these settings were derived from, kept for their
	// deriver: circuit.Breaker.Config returns it.
	Config Source
}

// Source is what a breaker's Settings were derived from, kept for their
// deriver (package circuit, whose configuration it holds).
type Source interface {
	// CheckReplacement reports whether the deriver would accept cfg (a
	// circuit.Config) in place of this source: circuit.Breaker.Reconfigure's
	// checks, for CheckReconfigure.
	CheckReplacement(cfg any) error
}

// MaxProbes bounds HalfOpenProbes: the in-flight probe count shares an
// atomic word with the generation.
const MaxProbes = math.MaxInt32

// settings is what a breaker derives from its Settings. Reconfigure
// replaces it whole with one atomic store: a decision loads it once and sees
// one configuration. The closed fast path of Allow does not read it.
type settings struct {
	Settings
	window     *windowed.Tally // the health window, of healthEvents
	slowOn     bool            // slow-call detection is on
	z          float64         // the normal quantile of Confidence (two-sided); 0: off
	generation uint64          // accepted Reconfigure calls so far
}

// cfg returns the settings in force.
func (b *Breaker) cfg() *settings { return b.settings.Load() }

// derive returns the settings of s with window w.
func derive(s Settings, w *windowed.Tally) *settings {
	return &settings{Settings: s, window: w, slowOn: s.SlowCallDuration > 0, z: zScore(s.Confidence)}
}

// CheckReconfigure reports whether circuit.Breaker.Reconfigure would
// accept cfg, a circuit.Config, without changing anything: package command
// checks every breaker of a group before it reconfigures any.
func (b *Breaker) CheckReconfigure(cfg any) error { return b.cfg().Config.CheckReplacement(cfg) }

// Reconfigure replaces the breaker's settings with s, validated by its
// caller, and returns the settings it replaced and the count of accepted
// Reconfigure calls, this one included; see
// circuit.Breaker.Reconfigure for what stays. The window is kept while its
// shape is unchanged; the backed-off open duration is reset to the new
// OpenDuration if it was not backed off, else kept within [OpenDuration,
// MaxOpenDuration].
func (b *Breaker) Reconfigure(s Settings) (old Settings, generation uint64, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	prev := b.cfg()
	window := prev.window
	if s.Window != prev.Window {
		if window, err = windowed.NewTally(s.Window, healthEvents); err != nil {
			return prev.Settings, prev.generation, err
		}
	}
	next := derive(s, window)
	next.generation = prev.generation + 1
	if b.openFor == prev.OpenDuration {
		b.openFor = s.OpenDuration
	} else {
		b.openFor = min(max(b.openFor, s.OpenDuration), s.MaxOpenDuration)
	}
	b.settings.Store(next)
	return prev.Settings, next.generation, nil
}

// SatMul returns d × f, saturating at the largest Duration instead of
// overflowing.
func SatMul(d time.Duration, f float64) time.Duration {
	p := float64(d) * f
	if p >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(p)
}

// satAdd returns t + d for d >= 0, saturating at the largest Duration: a
// deadline too far away to overflow into the past.
func satAdd(t, d time.Duration) time.Duration {
	if t > 0 && d > math.MaxInt64-t {
		return math.MaxInt64
	}
	return t + d
}
