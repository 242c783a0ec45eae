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

func TestWithDefaults(t *testing.T) {
	e := Config{}.WithDefaults()
	assert.Equal(t, metrics.DefaultWindow(), e.Window)
	assert.Equal(t, 20, e.MinRequests)
	assert.Equal(t, 0.5, e.FailureRatio)
	assert.Zero(t, e.SlowCallDuration)
	assert.Zero(t, e.SlowCallRatio)
	assert.Equal(t, 5*time.Second, e.OpenDuration)
	assert.Zero(t, e.BackoffMultiplier)
	assert.Equal(t, 5*time.Second, e.MaxOpenDuration, "no backoff: the cap is the open duration")
	assert.Equal(t, 1, e.HalfOpenProbes)
	assert.Equal(t, 3, e.HalfOpenSuccesses)
	assert.Equal(t, 10*time.Second, e.HalfOpenMaxWait)
	assert.Zero(t, e.RampUp)
	assert.Zero(t, e.RampUpFloor, "no floor without ramp-up")
	assert.Zero(t, e.WarmUp)
	assert.Equal(t, 1, e.HalfOpenFailures, "any failed probe reopens")
	assert.Equal(t, RampLinear, e.RampSchedule)
	assert.Zero(t, e.RampDoublingInterval)
	assert.Zero(t, e.HealthCheckTimeout)
	assert.Equal(t, Normal, e.Mode)
	assert.NotNil(t, e.Clock)
	assert.Same(t, slog.Default(), e.Logger)
	require.NoError(t, e.Validate())

	e = Config{
		Window:            metrics.Window{Length: time.Second},
		OpenDuration:      time.Second,
		BackoffMultiplier: 2,
		RampUp:            time.Minute,
	}.WithDefaults()
	assert.Equal(t, metrics.Window{Length: time.Second, Buckets: 10}, e.Window)
	assert.Equal(t, 10*time.Second, e.MaxOpenDuration, "backoff: 10 × open duration")
	assert.Equal(t, 2*time.Second, e.HalfOpenMaxWait)
	assert.Equal(t, 0.1, e.RampUpFloor)

	// Set values are kept.
	c := Config{
		Name: "x", Window: metrics.Window{Length: 2 * time.Second, Buckets: 4}, MinRequests: 7,
		FailureRatio: 0.3, SlowCallDuration: time.Second, SlowCallRatio: 0.9, OpenDuration: 3 * time.Second,
		BackoffMultiplier: 1.5, MaxOpenDuration: time.Minute, HalfOpenProbes: 4, HalfOpenSuccesses: 5,
		HalfOpenMaxWait: time.Hour, RampUp: time.Second, RampUpFloor: 0.5, WarmUp: time.Second, Mode: ObserveOnly,
		HalfOpenFailures: 2, Clock: new(metrics.ManualClock), Logger: slog.New(slog.DiscardHandler), OnTransition: func(Transition) {},
	}
	d := c.WithDefaults()
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
		{"BackoffMultiplier negative", Config{BackoffMultiplier: -2}, "BackoffMultiplier -2"},
		{"BackoffMultiplier below 1", Config{BackoffMultiplier: 0.5}, "BackoffMultiplier 0.5"},
		{"BackoffMultiplier infinite", Config{BackoffMultiplier: math.Inf(1)}, "BackoffMultiplier +Inf"},
		{"BackoffMultiplier 1", Config{BackoffMultiplier: 1}, ""},
		{"MaxOpenDuration negative", Config{MaxOpenDuration: -1}, "MaxOpenDuration -1ns"},
		{"MaxOpenDuration below OpenDuration", Config{MaxOpenDuration: time.Second}, "MaxOpenDuration 1s must not be below OpenDuration 5s"},
		{"HalfOpenProbes negative", Config{HalfOpenProbes: -3}, "HalfOpenProbes -3"},
		{"HalfOpenProbes too many", Config{HalfOpenProbes: math.MaxInt32 + 1}, "HalfOpenProbes 2147483648"},
		{"HalfOpenSuccesses negative", Config{HalfOpenSuccesses: -1}, "HalfOpenSuccesses -1"},
		{"HalfOpenMaxWait negative", Config{HalfOpenMaxWait: -time.Minute}, "HalfOpenMaxWait -1m0s"},
		{"RampUp negative", Config{RampUp: -time.Second}, "RampUp -1s"},
		{"RampUpFloor above 1", Config{RampUp: time.Second, RampUpFloor: 1.1}, "RampUpFloor 1.1"},
		{"RampUpFloor negative", Config{RampUp: time.Second, RampUpFloor: -0.1}, "RampUpFloor -0.1"},
		{"RampUpFloor without RampUp", Config{RampUpFloor: 0.2}, "RampUpFloor 0.2 is set but RampUp is 0"},
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
