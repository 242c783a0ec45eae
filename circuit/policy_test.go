package circuit

import (
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/logtest"
	"github.com/bulwark-go/bulwark/metrics"
)

func TestHalfOpenFailures(t *testing.T) {
	two := with(func(c *Config) { c.HalfOpenFailures = 2 })
	three := with(func(c *Config) { c.HalfOpenFailures = 2; c.HalfOpenSuccesses = 3 })
	slow := with(func(c *Config) {
		c.HalfOpenFailures = 2
		c.SlowCallDuration = 100 * time.Millisecond
		c.SlowCallRatio = 0.5
	})
	trip := []Reason{ReasonErrorRatio, ReasonOpenElapsed}
	runScripts(t, []scriptCase{
		{"default: one failed probe reopens", base(), "4*f +1s f =open", append(trip, ReasonProbeFailed)},
		{"two in a row reopen", two, "4*f +1s f =half-open t =open x", append(trip, ReasonProbeFailed)},
		{"a success in between starts the count again", three, "4*f +1s f s f =half-open f =open",
			append(trip, ReasonProbeFailed)},
		{"a failure in between starts the successes again", three, "4*f +1s s s f s s =half-open s =closed",
			append(trip, ReasonProbesSucceeded)},
		{"a slow probe is a failed probe", slow, "4*f +1s w =half-open w =open", append(trip, ReasonProbeFailed)},
		{"an ignored probe counts neither way", two, "4*f +1s f i =half-open f =open", append(trip, ReasonProbeFailed)},
		{"the count does not carry into the next half-open state", two,
			"4*f +1s f f =open +1s f =half-open f =open", append(trip, ReasonProbeFailed, ReasonOpenElapsed, ReasonProbeFailed)},
	})
}

func TestHalfOpenFailuresSnapshotAndBackoff(t *testing.T) {
	r := newRig(t, with(func(c *Config) { c.HalfOpenFailures = 2; c.OpenBackoff = 2 }))
	r.run("4*f +1s f")
	s := r.b.Snapshot()
	assert.Equal(t, HalfOpen, s.State)
	assert.Equal(t, 1, s.ProbeFailures)
	r.run("f =open")
	s = r.b.Snapshot()
	assert.Zero(t, s.ProbeFailures)
	assert.Equal(t, 2*time.Second, s.OpenDuration, "the reopening is a failed trial: backed off")
}

// A result that neither closes nor reopens renews the wait of the probes
// still out, as a success short of closing does.
func TestHalfOpenFailuresRenewsProbeWait(t *testing.T) {
	r := newRig(t, with(func(c *Config) { c.HalfOpenFailures = 2; c.HalfOpenProbes = 2 }))
	r.run("4*f +1s h h +1500ms rf +1500ms =half-open +500ms =open")
	assert.Equal(t, ReasonHalfOpenTimeout, r.transitions()[2].Reason)
}

// admitted makes n calls recorded as successes and returns how many were
// admitted.
func (r *rig) admitted(n int) int {
	k := 0
	for range n {
		if r.call(metrics.Success, false) == nil {
			k++
		}
	}
	return k
}

func TestRampDoubling(t *testing.T) {
	r := newRig(t, with(func(c *Config) { c.RampDuration = 30 * time.Second; c.RampDoubling = 3 * time.Second }))
	assert.Equal(t, 0.01, r.b.Config().RampFloor, "doubling from 1 %")
	r.run("4*f +1s s s =closed")
	for _, step := range []struct {
		at    time.Duration
		share float64
	}{{0, 0.01}, {2999 * time.Millisecond, 0.01}, {3 * time.Second, 0.02}, {6 * time.Second, 0.04},
		{18 * time.Second, 0.64}, {20999 * time.Millisecond, 0.64}} {
		r.clock.Set(time.Second + step.at)
		assert.InDelta(t, step.share, r.b.Snapshot().RampShare, 1e-9, "at %v", step.at)
	}
	r.clock.Set(time.Second + 6*time.Second)
	assert.Equal(t, 4, r.admitted(100), "4 %% of 100 calls, deterministically")
	r.clock.Set(time.Second + 21*time.Second)
	assert.Equal(t, 100, r.admitted(100), "1.28 ≥ 1: the ramp is over at 21 s, before RampDuration")
	assert.True(t, r.fastPath(), "back on the fast path")
}

func TestRampDoublingEndsAtRampUp(t *testing.T) {
	r := newRig(t, with(func(c *Config) {
		c.RampDuration = 10 * time.Second
		c.RampFloor = 0.001
		c.RampDoubling = time.Second
	}))
	r.run("4*f +1s s s +9999ms")
	assert.InDelta(t, 0.512, r.b.Snapshot().RampShare, 1e-9)
	r.run("+1ms")
	assert.Equal(t, 1.0, r.b.Snapshot().RampShare)
	assert.Equal(t, 10, r.admitted(10))
}

func TestRampFunc(t *testing.T) {
	var r *rig
	var calls int
	r = newRig(t, with(func(c *Config) {
		c.RampDuration = time.Minute
		c.RampFunc = func(elapsed time.Duration) float64 {
			calls++
			if r != nil && r.b != nil {
				assert.True(t, lockFree(r.b), "RampFunc called with the breaker's lock held")
			}
			if elapsed < 5*time.Second {
				return 0.25
			}
			return 1
		}
	}))
	assert.Equal(t, 1, calls, "Validate calls it once with 0")
	r.run("4*f +1s s s =closed")
	assert.Equal(t, 0.25, r.b.Snapshot().RampShare)
	assert.Equal(t, 25, r.admitted(100))
	r.run("+5s")
	assert.Equal(t, 100, r.admitted(100), "a share of 1 ends the ramp before RampDuration")
	assert.True(t, r.fastPath(), "back on the fast path")
}

// lockFree reports whether a method that takes b's lock (SetMode(Normal),
// a no-op on a breaker in normal mode) can run now, from another goroutine;
// it gives up after 10 s, so a caller that holds the lock gets false, not a
// deadlock.
func lockFree(b *Breaker) bool {
	done := make(chan struct{})
	go func() {
		b.SetMode(Normal)
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

// A schedule that panics or answers nonsense ends the ramp (full traffic,
// as without ramp-up) and says so at Error level; the caller never sees
// the panic.
func TestRampFuncFaultEndsRamp(t *testing.T) {
	for name, f := range map[string]func(*bool) float64{
		"panic": func(bad *bool) float64 {
			if *bad {
				panic("schedule bug")
			}
			return 0.5
		},
		"NaN":     func(bad *bool) float64 { return map[bool]float64{false: 0.5, true: math.NaN()}[*bad] },
		"zero":    func(bad *bool) float64 { return map[bool]float64{false: 0.5, true: 0}[*bad] },
		"above 1": func(bad *bool) float64 { return map[bool]float64{false: 0.5, true: 1.5}[*bad] },
	} {
		t.Run(name, func(t *testing.T) {
			var logs logtest.Buffer
			bad := false
			clock := new(metrics.ManualClock)
			cfg := with(func(c *Config) {
				c.RampDuration = time.Minute
				c.RampFunc = func(time.Duration) float64 { return f(&bad) }
				c.Clock = clock
				c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			})
			b, err := New(cfg)
			require.NoError(t, err)
			r := &rig{t: t, b: b, clock: clock}
			r.run("4*f +1s s s =closed")
			assert.Equal(t, 5, r.admitted(10))
			bad = true
			assert.Equal(t, 10, r.admitted(10))
			assert.Contains(t, logs.String(), "RampFunc failed; ramp-up ended")
			bad = false
			assert.Equal(t, 10, r.admitted(10), "the ramp stays over")
		})
	}
}

func TestRampValidate(t *testing.T) {
	half := func(time.Duration) float64 { return 0.5 }
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"doubling", Config{RampDuration: time.Second, RampDoubling: 3 * time.Second}, ""},
		{"doubling, own floor and interval", Config{
			RampDuration: time.Second,
			RampFloor:    0.05,
			RampDoubling: time.Second,
		}, ""},
		{"func", Config{RampDuration: time.Second, RampFunc: half}, ""},
		{"doubling without RampDuration", Config{RampDoubling: 3 * time.Second}, "RampDoubling 3s or RampFunc is set but RampDuration is 0"},
		{"func without RampDuration", Config{RampFunc: half}, "RampFunc is set but RampDuration is 0"},
		{"interval negative", Config{RampDuration: time.Second, RampDoubling: -1},
			"RampDoubling -1ns must not be negative"},
		{"func and doubling", Config{RampDuration: time.Second, RampFunc: half, RampDoubling: 3 * time.Second},
			"RampFunc is set, so RampDoubling 3s must be left zero"},
		{"func and floor", Config{RampDuration: time.Second, RampFunc: half, RampFloor: 0.1},
			"RampFloor 0.1 is set but RampFunc gives the schedule"},
		{"func share 0", Config{RampDuration: time.Second, RampFunc: func(time.Duration) float64 { return 0 }},
			"RampFunc(0) = 0 must be in (0, 1]"},
		{"func panics", Config{RampDuration: time.Second, RampFunc: func(time.Duration) float64 { panic("boom") }},
			"RampFunc(0): panic: boom"},
		{"doubling floor above 1", Config{RampDuration: time.Second, RampFloor: 2, RampDoubling: 3 * time.Second}, "RampFloor 2"},
		{"HalfOpenFailures negative", Config{HalfOpenFailures: -1}, "HalfOpenFailures -1 must not be negative"},
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
}

func TestWarmUpRestart(t *testing.T) {
	r := newRig(t, base())
	require.NoError(t, r.b.WarmUp(10*time.Second))
	s := r.b.Snapshot()
	assert.Equal(t, 10*time.Second, s.WarmUpLeft)
	r.run("20*f =closed +9999ms 20*f =closed")
	assert.Zero(t, r.b.Snapshot().Health.Requests, "nothing counted during warm-up")
	r.run("+1ms")
	s = r.b.Snapshot()
	assert.Zero(t, s.WarmUpLeft)
	r.run("4*f =open")

	// A second call restarts it; the open breaker stays open, and probe
	// results are not counted either.
	require.NoError(t, r.b.WarmUp(time.Minute))
	r.run("=open +1s f =half-open f s s =half-open")
	require.NoError(t, r.b.WarmUp(0), "WarmUp(0) ends it")
	assert.Zero(t, r.b.Snapshot().WarmUpLeft)
	r.run("s s =closed")
	assert.Equal(t, []Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonProbesSucceeded}, r.reasons())
}

func TestWarmUpReplacesConfigWarmUp(t *testing.T) {
	r := newRig(t, with(func(c *Config) { c.WarmUp = time.Hour }))
	assert.Equal(t, time.Hour, r.b.Snapshot().WarmUpLeft)
	require.NoError(t, r.b.WarmUp(time.Second), "a shorter warm-up replaces a longer one")
	r.run("+1s 4*f =open")
}

func TestWarmUpNegative(t *testing.T) {
	r := newRig(t, with(func(c *Config) { c.WarmUp = time.Minute }))
	err := r.b.WarmUp(-time.Second)
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.True(t, strings.Contains(err.Error(), "WarmUp -1s must not be negative"), err.Error())
	assert.Equal(t, time.Minute, r.b.Snapshot().WarmUpLeft, "unchanged")
}

// The low-traffic case with every breaker-side policy on: one successful
// call per OpenDuration closes the breaker, and the ramp after it ends.
func TestLowTrafficClosesWithPolicies(t *testing.T) {
	r := newRig(t, with(func(c *Config) {
		c.HalfOpenFailures = 2
		c.HalfOpenSuccesses = 3
		c.RampDuration = 30 * time.Second
		c.RampDoubling = 3 * time.Second
	}))
	require.NoError(t, r.b.WarmUp(500*time.Millisecond))
	r.run("+500ms 4*f =open +1s s =half-open +1s s =half-open +1s s =closed")
	assert.Equal(t, []Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonProbesSucceeded}, r.reasons())
	for range 40 { // one call per second through the ramp
		r.clock.Advance(time.Second)
		_ = r.call(metrics.Success, false) // shed or admitted, both fine here
	}
	r.run("s =closed")
	assert.Equal(t, 1.0, r.b.Snapshot().RampShare)
}
