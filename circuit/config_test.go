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
	assert.Equal(t, 5*time.Second, e.OpenDuration)
	assert.Zero(t, e.OpenBackoff)
	assert.Equal(t, 5*time.Second, e.OpenMaxDuration, "no backoff: the cap is the open duration")
	assert.Equal(t, 1, e.HalfOpenProbes)
	assert.Equal(t, 3, e.HalfOpenSuccesses)
	assert.Equal(t, 10*time.Second, e.HalfOpenMaxWait)
	assert.Zero(t, e.RampDuration)
	assert.Zero(t, e.RampFloor, "no floor without ramp-up")
	assert.Zero(t, e.WarmUp)
	assert.Equal(t, 1, e.HalfOpenFailures, "any failed probe reopens")
	assert.Zero(t, e.RampDoubling, "linear")
	assert.Equal(t, Normal, e.Mode)
	assert.NotNil(t, e.Clock)
	assert.Same(t, slog.Default(), e.Logger)
	require.NoError(t, e.Validate())

	e = effective(t, Config{
		Window:       metrics.Window{Length: time.Second},
		OpenDuration: time.Second,
		OpenBackoff:  2,
		RampDuration: time.Minute,
	})
	assert.Equal(t, metrics.Window{Length: time.Second, Buckets: 10}, e.Window)
	assert.Equal(t, 10*time.Second, e.OpenMaxDuration, "backoff: 10 × open duration")
	assert.Equal(t, 2*time.Second, e.HalfOpenMaxWait)
	assert.Equal(t, 0.1, e.RampFloor)

	// Set values are kept.
	c := Config{
		Name:              "x",
		Window:            metrics.Window{Length: 2 * time.Second, Buckets: 4},
		MinRequests:       7,
		FailureRatio:      0.3,
		SlowCallDuration:  time.Second,
		SlowCallRatio:     0.9,
		OpenDuration:      3 * time.Second,
		OpenBackoff:       1.5,
		OpenMaxDuration:   time.Minute,
		HalfOpenProbes:    4,
		HalfOpenSuccesses: 5,
		HalfOpenMaxWait:   time.Hour,
		HalfOpenFailures:  2,
		RampDuration:      time.Second,
		RampFloor:         0.5,
		WarmUp:            time.Second,
		Mode:              ObserveOnly,
		Clock:             new(metrics.ManualClock),
		Logger:            slog.New(slog.DiscardHandler),
		OnTransition:      func(Transition) {},
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
		{"OpenDuration negative", Config{OpenDuration: -time.Second}, "OpenDuration -1s"},
		{"OpenBackoff negative", Config{OpenBackoff: -2}, "OpenBackoff -2"},
		{"OpenBackoff below 1", Config{OpenBackoff: 0.5}, "OpenBackoff 0.5"},
		{"OpenBackoff infinite", Config{OpenBackoff: math.Inf(1)}, "OpenBackoff +Inf"},
		{"OpenBackoff 1", Config{OpenBackoff: 1}, ""},
		{"OpenMaxDuration negative", Config{OpenMaxDuration: -1}, "OpenMaxDuration -1ns"},
		{"OpenMaxDuration below OpenDuration", Config{OpenMaxDuration: time.Second}, "OpenMaxDuration 1s must not be below OpenDuration 5s"},
		{"HalfOpenProbes negative", Config{HalfOpenProbes: -3}, "HalfOpenProbes -3"},
		{"HalfOpenProbes too many", Config{HalfOpenProbes: math.MaxInt32 + 1}, "HalfOpenProbes 2147483648"},
		{"HalfOpenSuccesses negative", Config{HalfOpenSuccesses: -1}, "HalfOpenSuccesses -1"},
		{"HalfOpenMaxWait negative", Config{HalfOpenMaxWait: -time.Minute}, "HalfOpenMaxWait -1m0s"},
		{"RampDuration negative", Config{RampDuration: -time.Second}, "RampDuration -1s"},
		{"RampFloor above 1", Config{RampDuration: time.Second, RampFloor: 1.1}, "RampFloor 1.1"},
		{"RampFloor negative", Config{RampDuration: time.Second, RampFloor: -0.1}, "RampFloor -0.1"},
		{"RampFloor without RampDuration", Config{RampFloor: 0.2}, "RampFloor 0.2 is set but RampDuration is 0"},
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
