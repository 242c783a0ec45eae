package circuit

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/bulwark-go/bulwark/internal/logtest"
	"github.com/bulwark-go/bulwark/metrics"
)

var errDown = errors.New("dependency down")

// probe is a health check whose answer the test sets.
type probe struct {
	healthy atomic.Bool
	calls   atomic.Int64
	running atomic.Int64
	overlap atomic.Bool
}

func (p *probe) check(ctx context.Context) error {
	if p.running.Add(1) > 1 {
		p.overlap.Store(true)
	}
	defer p.running.Add(-1)
	p.calls.Add(1)
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("no deadline")
	}
	if p.healthy.Load() {
		return nil
	}
	return errDown
}

func manualCheck(p *probe) Config {
	return with(func(c *Config) {
		c.Open.Duration = time.Minute
		c.HealthCheck.Check = p.check
		c.HealthCheck.Interval = HealthCheckManual
	})
}

func TestCheckHealthMovesToHalfOpen(t *testing.T) {
	p := new(probe)
	r := newRig(t, manualCheck(p))
	ctx := context.Background()

	err := r.b.CheckHealth(ctx)
	require.ErrorIs(t, err, ErrHealthCheckSkipped, "closed: nothing to check")
	assert.Zero(t, p.calls.Load())

	r.run("4*f =open +500ms")
	err = r.b.CheckHealth(ctx)
	require.ErrorIs(t, err, ErrHealthCheckFailed)
	require.ErrorIs(t, err, errDown)
	r.run("=open x")

	p.healthy.Store(true)
	r.run("+500ms")
	require.NoError(t, r.b.CheckHealth(ctx))
	r.run("=half-open s s =closed")
	assert.Equal(t, []Reason{ReasonErrorRatio, ReasonHealthCheck, ReasonProbesSucceeded}, r.reasons())
	assert.Equal(t, time.Second, r.transitions()[1].At, "half-open at once, not after the 1 min open duration")

	s := r.b.Snapshot().HealthCheck
	assert.Equal(t, HealthCheckStatus{Checks: 2, Failures: 1}, s)
}

func TestCheckHealthFailedProbeReopens(t *testing.T) {
	p := new(probe)
	p.healthy.Store(true)
	r := newRig(t, manualCheck(p))
	r.run("4*f =open")
	require.NoError(t, r.b.CheckHealth(context.Background()))
	r.run("f =open")
	assert.Equal(t, []Reason{ReasonErrorRatio, ReasonHealthCheck, ReasonProbeFailed}, r.reasons())
}

func TestCheckHealthSkips(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, base())
	require.ErrorIs(t, r.b.CheckHealth(ctx), ErrHealthCheckSkipped, "no HealthCheck configured")

	p := new(probe)
	p.healthy.Store(true)
	r = newRig(t, manualCheck(p))
	r.run("@forced-open")
	require.ErrorIs(t, r.b.CheckHealth(ctx), ErrHealthCheckSkipped, "forced open stays open")
	r.run("@normal 4*f +1m =half-open")
	require.ErrorIs(t, r.b.CheckHealth(ctx), ErrHealthCheckSkipped, "half-open already")
	assert.Zero(t, p.calls.Load())

	r.run("f =open")
	r.b.Close()
	require.ErrorIs(t, r.b.CheckHealth(ctx), ErrHealthCheckSkipped, "closed for good")
	r.b.Close()          // idempotent
	r.run("=open +2m s") // the breaker still works
}

// A check that passes after the breaker left that open state (here: the
// open duration ran out during the check) changes nothing more.
func TestCheckHealthStaleResult(t *testing.T) {
	var r *rig
	r = newRig(t, with(func(c *Config) {
		c.HealthCheck.Check = func(context.Context) error { r.clock.Advance(time.Second); return nil }
		c.HealthCheck.Interval = HealthCheckManual
	}))
	r.run("4*f =open")
	require.NoError(t, r.b.CheckHealth(context.Background()))
	r.run("=half-open")
	assert.Equal(t, []Reason{ReasonErrorRatio, ReasonOpenElapsed}, r.reasons())
}

func TestCheckHealthNeverConcurrent(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	r := newRig(t, with(func(c *Config) {
		c.HealthCheck.Check = func(context.Context) error { close(entered); <-release; return nil }
		c.HealthCheck.Interval = HealthCheckManual
	}))
	r.run("4*f")
	done := make(chan error)
	go func() { done <- r.b.CheckHealth(context.Background()) }()
	<-entered
	require.ErrorIs(t, r.b.CheckHealth(context.Background()), ErrHealthCheckSkipped)
	close(release)
	require.NoError(t, <-done)
	r.run("=half-open")
}

func TestCheckHealthPanicIsAFailure(t *testing.T) {
	var logs logtest.Buffer
	b, err := New(with(func(c *Config) {
		c.Clock = new(metrics.ManualClock)
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		c.HealthCheck.Check = func(context.Context) error { panic("check bug") }
		c.HealthCheck.Interval = HealthCheckManual
		c.HealthCheck.Timeout = time.Second
	}))
	require.NoError(t, err)
	for range 4 {
		p, _ := b.Allow()
		p.Record(metrics.Failure, 0)
	}
	require.Equal(t, Open, b.State())
	err = b.CheckHealth(context.Background())
	require.ErrorIs(t, err, ErrHealthCheckFailed)
	assert.Contains(t, err.Error(), "panic: check bug")
	assert.Contains(t, logs.String(), "HealthCheck.Check panicked")
	assert.Equal(t, "panic: check bug", b.Snapshot().HealthCheck.LastErr)
	assert.Equal(t, Open, b.State())
}

func TestHealthCheckValidate(t *testing.T) {
	ok := func(context.Context) error { return nil }
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"scheduled", Config{HealthCheck: HealthCheckConfig{Check: ok, Interval: time.Second}}, ""},
		{"manual", Config{HealthCheck: HealthCheckConfig{Check: ok, Interval: HealthCheckManual}}, ""},
		{"no interval", Config{HealthCheck: HealthCheckConfig{Check: ok}}, "HealthCheck.Interval must be set when HealthCheck.Check is"},
		{"interval negative", Config{HealthCheck: HealthCheckConfig{Check: ok, Interval: -time.Second}},
			"HealthCheck.Interval -1s must not be negative"},
		{"interval without check", Config{HealthCheck: HealthCheckConfig{Interval: time.Second}},
			"HealthCheck.Interval 1s or HealthCheck.Timeout 0s is set but HealthCheck.Check is nil"},
		{"timeout without check", Config{HealthCheck: HealthCheckConfig{Timeout: time.Second}}, "HealthCheck.Timeout 1s is set but HealthCheck.Check is nil"},
		{"timeout negative", Config{HealthCheck: HealthCheckConfig{Check: ok, Interval: time.Second, Timeout: -1}},
			"HealthCheck.Timeout -1ns must not be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	e := Config{HealthCheck: HealthCheckConfig{Check: ok, Interval: 500 * time.Millisecond}}.withDefaults()
	assert.Equal(t, 500*time.Millisecond, e.HealthCheck.Timeout)
	e = Config{HealthCheck: HealthCheckConfig{Check: ok, Interval: HealthCheckManual}}.withDefaults()
	assert.Equal(t, defaultCheckTimeout, e.HealthCheck.Timeout)
}

// Real time, generous bounds: the checker runs every interval while open,
// never two at once, turns the breaker half-open when the dependency heals,
// and its goroutine is gone once the breaker is not open.
func TestHealthCheckScheduled(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := new(probe)
	r := newRig(t, with(func(c *Config) {
		c.Open.Duration = time.Hour
		c.HealthCheck.Check = p.check
		c.HealthCheck.Interval = 5 * time.Millisecond
	}))
	defer r.b.Close()
	r.run("4*f =open")
	require.Eventually(t, func() bool { return p.calls.Load() >= 3 }, 10*time.Second, time.Millisecond)
	r.run("=open")
	p.healthy.Store(true)
	require.Eventually(t, func() bool { return r.b.State() == HalfOpen }, 10*time.Second, time.Millisecond)
	// The checker's goroutine reports the transition after applying it:
	// State can show it first.
	require.Eventually(t, func() bool { return len(r.reasons()) == 2 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, []Reason{ReasonErrorRatio, ReasonHealthCheck}, r.reasons())
	require.Eventually(t, r.checkerGone, 10*time.Second, time.Millisecond, "the goroutine leaves with the open state")
	assert.False(t, p.overlap.Load(), "checks never overlap")

	// It comes back with the next opening, and Close stops it.
	r.run("f =open")
	require.Eventually(t, func() bool { return p.calls.Load() >= 1 }, 10*time.Second, time.Millisecond)
	p.healthy.Store(false)
	r.b.Close()
	assert.True(t, r.checkerGone())
	calls := p.calls.Load()
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, calls, p.calls.Load(), "no check after Close")
}

// Close cancels a check in progress and waits for it.
func TestHealthCheckCloseCancelsCheck(t *testing.T) {
	defer goleak.VerifyNone(t)
	entered := make(chan struct{})
	r := newRig(t, with(func(c *Config) {
		c.HealthCheck.Check = func(ctx context.Context) error { close(entered); <-ctx.Done(); return ctx.Err() }
		c.HealthCheck.Interval = time.Millisecond
		c.HealthCheck.Timeout = time.Hour
	}))
	r.run("4*f =open")
	<-entered
	r.b.Close()
	assert.True(t, r.checkerGone())
	assert.Equal(t, int64(1), r.b.Snapshot().HealthCheck.Failures)
}

// checkerGone reports whether the health check's goroutine has returned:
// no goroutine runs the breaker's health loop.
func (r *rig) checkerGone() bool {
	buf := make([]byte, 1<<20)
	return !bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("(*Breaker).healthLoop"))
}
