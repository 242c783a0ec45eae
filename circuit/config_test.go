package circuit

import (
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/metrics"
)

// effective returns the configuration a breaker made from cfg runs on.
func effective(t *testing.T, cfg Config) Config {
	t.Helper()
	b, err := New(cfg)
	require.NoError(t, err)
	return b.Config()
}

func TestConfigDefaults(t *testing.T) {
	e := effective(t, Config{})
	assert.Equal(t, metrics.DefaultWindow(), e.Window)
	assert.Equal(t, 20, e.MinRequests)
	assert.Equal(t, 0.5, e.FailureRatio)
	assert.Zero(t, e.SlowCallDuration)
	assert.Zero(t, e.SlowCallRatio)
	assert.Equal(t, 5*time.Second, e.Open.Duration)
	assert.Zero(t, e.Open.Backoff)
	assert.Equal(t, 5*time.Second, e.Open.Max, "no backoff: the cap is the open duration")
	assert.Equal(t, 1, e.HalfOpen.Probes)
	assert.Equal(t, 3, e.HalfOpen.Successes)
	assert.Equal(t, 10*time.Second, e.HalfOpen.MaxWait)
	assert.Zero(t, e.Ramp.Duration)
	assert.Zero(t, e.Ramp.Floor, "no floor without ramp-up")
	assert.Zero(t, e.WarmUp)
	assert.Equal(t, 1, e.HalfOpen.Failures, "any failed probe reopens")
	assert.Zero(t, e.Ramp.Doubling, "linear")
	assert.Equal(t, Normal, e.Mode)
	assert.NotNil(t, e.Clock)
	assert.Same(t, slog.Default(), e.Logger)
	require.NoError(t, e.Validate())

	e = effective(t, Config{
		Window: metrics.Window{Length: time.Second},
		Open:   OpenConfig{Duration: time.Second, Backoff: 2},
		Ramp:   RampConfig{Duration: time.Minute},
	})
	assert.Equal(t, metrics.Window{Length: time.Second, Buckets: 10}, e.Window)
	assert.Equal(t, 10*time.Second, e.Open.Max, "backoff: 10 × open duration")
	assert.Equal(t, 2*time.Second, e.HalfOpen.MaxWait)
	assert.Equal(t, 0.1, e.Ramp.Floor)

	// Set values are kept.
	c := Config{
		Name:             "x",
		Window:           metrics.Window{Length: 2 * time.Second, Buckets: 4},
		MinRequests:      7,
		FailureRatio:     0.3,
		SlowCallDuration: time.Second,
		SlowCallRatio:    0.9,
		Open:             OpenConfig{Duration: 3 * time.Second, Backoff: 1.5, Max: time.Minute},
		HalfOpen:         HalfOpenConfig{Probes: 4, Successes: 5, MaxWait: time.Hour, Failures: 2},
		Ramp:             RampConfig{Duration: time.Second, Floor: 0.5},
		WarmUp:           time.Second,
		Mode:             ObserveOnly,
		Clock:            new(metrics.ManualClock),
		Logger:           slog.New(slog.DiscardHandler),
		OnTransition:     func(Transition) {},
	}
	d := effective(t, c)
	d.OnTransition, c.OnTransition = nil, nil // funcs do not compare
	assert.Equal(t, c, d)
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string // "" for valid
	}{
		{"zero config", Config{}, ""},
		{"window length negative", Config{Window: metrics.Window{Length: -time.Second}}, "Window {Length: -1s, Buckets: 0}"},
		{"window not a multiple of buckets", Config{Window: metrics.Window{Length: time.Second, Buckets: 7}}, "Window {Length: 1s, Buckets: 7}"},
		{"MinRequests negative", Config{MinRequests: -1}, "MinRequests -1"},
		{"FailureRatio negative", Config{FailureRatio: -0.5}, "FailureRatio -0.5"},
		{"FailureRatio above 1", Config{FailureRatio: 1.5}, "FailureRatio 1.5"},
		{"FailureRatio NaN", Config{FailureRatio: math.NaN()}, "FailureRatio NaN"},
		{"FailureRatio 1", Config{FailureRatio: 1}, ""},
		{"SlowCallDuration negative", Config{SlowCallDuration: -1}, "SlowCallDuration -1ns"},
		{"SlowCallRatio missing", Config{SlowCallDuration: time.Second}, "SlowCallRatio 0 must be in (0, 1]"},
		{"SlowCallRatio above 1", Config{SlowCallDuration: time.Second, SlowCallRatio: 2}, "SlowCallRatio 2"},
		{"SlowCallRatio without duration", Config{SlowCallRatio: 0.5}, "SlowCallRatio 0.5 is set but SlowCallDuration is 0"},
		{"slow calls on", Config{SlowCallDuration: time.Second, SlowCallRatio: 1}, ""},
		{"Open.Duration negative", Config{Open: OpenConfig{Duration: -time.Second}}, "Open.Duration -1s"},
		{"Open.Backoff negative", Config{Open: OpenConfig{Backoff: -2}}, "Open.Backoff -2"},
		{"Open.Backoff below 1", Config{Open: OpenConfig{Backoff: 0.5}}, "Open.Backoff 0.5"},
		{"Open.Backoff infinite", Config{Open: OpenConfig{Backoff: math.Inf(1)}}, "Open.Backoff +Inf"},
		{"Open.Backoff 1", Config{Open: OpenConfig{Backoff: 1}}, ""},
		{"Open.Max negative", Config{Open: OpenConfig{Max: -1}}, "Open.Max -1ns"},
		{"Open.Max below Open.Duration", Config{Open: OpenConfig{Max: time.Second}}, "Open.Max 1s must not be below Open.Duration 5s"},
		{"HalfOpen.Probes negative", Config{HalfOpen: HalfOpenConfig{Probes: -3}}, "HalfOpen.Probes -3"},
		{"HalfOpen.Probes too many", Config{HalfOpen: HalfOpenConfig{Probes: math.MaxInt32 + 1}}, "HalfOpen.Probes 2147483648"},
		{"HalfOpen.Successes negative", Config{HalfOpen: HalfOpenConfig{Successes: -1}}, "HalfOpen.Successes -1"},
		{"HalfOpen.MaxWait negative", Config{HalfOpen: HalfOpenConfig{MaxWait: -time.Minute}}, "HalfOpen.MaxWait -1m0s"},
		{"Ramp.Duration negative", Config{Ramp: RampConfig{Duration: -time.Second}}, "Ramp.Duration -1s"},
		{"Ramp.Floor above 1", Config{Ramp: RampConfig{Duration: time.Second, Floor: 1.1}}, "Ramp.Floor 1.1"},
		{"Ramp.Floor negative", Config{Ramp: RampConfig{Duration: time.Second, Floor: -0.1}}, "Ramp.Floor -0.1"},
		{"Ramp.Floor without Ramp.Duration", Config{Ramp: RampConfig{Floor: 0.2}}, "Ramp.Floor 0.2 is set but Ramp.Duration is 0"},
		{"WarmUp negative", Config{WarmUp: -time.Second}, "WarmUp -1s"},
		{"Mode unknown", Config{Mode: 4}, "Mode 4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			b, newErr := New(tc.cfg)
			if tc.want == "" {
				require.NoError(t, err)
				require.NoError(t, newErr)
				require.NotNil(t, b)
				return
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, err, newErr, "New reports what Validate does")
			assert.Nil(t, b)
		})
	}
}

func TestValidateWindowWrapsMetricsError(t *testing.T) {
	err := Config{Window: metrics.Window{Length: time.Second, Buckets: 3}}.Validate()
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.ErrorIs(t, err, metrics.ErrInvalidConfig)
}

func TestConfigReturnsEffectiveConfig(t *testing.T) {
	clock := new(metrics.ManualClock)
	b, err := New(Config{Name: "n", Clock: clock})
	require.NoError(t, err)
	c := b.Config()
	assert.Equal(t, "n", c.Name)
	assert.Equal(t, 20, c.MinRequests)
	assert.Same(t, clock, c.Clock)
}
