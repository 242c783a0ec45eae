package circuit

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/breaker"
	"github.com/bulwark-go/bulwark/metrics"
)

// base is a small breaker for scripts: 1 s window of 10 buckets, 4 calls
// minimum, 50 %, open 1 s, 1 probe at a time, 2 successes to close.
func base() Config {
	return Config{
		Name:              "test",
		Window:            metrics.Window{Length: time.Second, Buckets: 10},
		MinRequests:       4,
		OpenDuration:      time.Second,
		HalfOpenSuccesses: 2,
	}
}

func with(f func(*Config)) Config {
	c := base()
	f(&c)
	return c
}

type scriptCase struct {
	name    string
	cfg     Config
	script  string
	reasons []Reason
}

func runScripts(t *testing.T, cases []scriptCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.cfg)
			r.run(tc.script)
			assert.Equal(t, tc.reasons, r.reasons())
		})
	}
}

// One case per transition of the state machine.
func TestTransitions(t *testing.T) {
	slow := with(func(c *Config) { c.SlowCallDuration = 100 * time.Millisecond; c.SlowCallRatio = 0.5 })
	runScripts(t, []scriptCase{
		{"closed stays closed below the ratio", base(), "s s f s s f s =closed", nil},
		{"closed→open error_ratio at exactly the ratio", base(), "s s f =closed f =open x", []Reason{ReasonErrorRatio}},
		{"timeouts count as errors", base(), "s s t t =open", []Reason{ReasonErrorRatio}},
		{"closed→open slow_ratio", slow, "s s w =closed w =open x", []Reason{ReasonSlowRatio}},
		{"error_ratio wins when both ratios hold", slow, "w w f f =open", []Reason{ReasonErrorRatio}},
		{"slow calls off: slow successes are successes", base(), "w w w w f =closed", nil},
		{"a success never trips", base(), "3*f =closed s =closed f =open", []Reason{ReasonErrorRatio}},
		{"open→half-open open_elapsed", base(), "4*f +999ms x =open +1ms =half-open h x", []Reason{ReasonErrorRatio, ReasonOpenElapsed}},
		{"open→half-open lazily on Allow", base(), "4*f +1s s", []Reason{ReasonErrorRatio, ReasonOpenElapsed}},
		{"half-open→closed probes_succeeded", base(), "4*f +1s s =half-open s =closed 20*s",
			[]Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonProbesSucceeded}},
		{"half-open→open probe_failed", base(), "4*f +1s s f =open x",
			[]Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonProbeFailed}},
		{"probe timeout fails the trial", base(), "4*f +1s t =open", []Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonProbeFailed}},
		{"slow probe fails the trial", slow, "4*f +1s w =open", []Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonProbeFailed}},
		{"slow probe is a success without slow detection", base(), "4*f +1s w w =closed",
			[]Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonProbesSucceeded}},
		{"ignored probe frees the slot, does not count", base(), "4*f +1s h x ri s i s =closed",
			[]Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonProbesSucceeded}},
		{"half-open→open half_open_timeout", base(), "4*f +1s h +1999ms =half-open +1ms =open rs =open",
			[]Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonHalfOpenTimeout}},
		{"closed→open forced", base(), "@forced-open =open x", []Reason{ReasonForced}},
		{"open→closed forced", base(), "4*f @forced-closed =closed s", []Reason{ReasonErrorRatio, ReasonForced}},
		{"half-open→open forced", base(), "4*f +1s h @forced-open =open", []Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonForced}},
		{"forced-open→normal restarts closed", base(), "@forced-open @normal =closed s", []Reason{ReasonForced, ReasonForced}},
	})
}

// One case per knob, showing its effect.
func TestKnobs(t *testing.T) {
	runScripts(t, []scriptCase{
		{"Window: failures leave after the window", base(), "3*f +1s f =closed", nil},
		{"Window: bucket granularity keeps a failure until its bucket leaves", base(),
			"+50ms 3*f +949ms f =open", []Reason{ReasonErrorRatio}},
		{"MinRequests: no verdict below it", with(func(c *Config) { c.MinRequests = 10 }), "9*f =closed f =open", []Reason{ReasonErrorRatio}},
		{"MinRequests: default 20", with(func(c *Config) { c.MinRequests = 0 }), "19*f =closed f =open", []Reason{ReasonErrorRatio}},
		{"FailureRatio", with(func(c *Config) { c.FailureRatio = 0.75 }), "s f f =closed f =open", []Reason{ReasonErrorRatio}},
		{"FailureRatio 1 needs every call to fail", with(func(c *Config) { c.FailureRatio = 1 }), "s 10*f =closed", nil},
		{"SlowCallRatio", with(func(c *Config) { c.SlowCallDuration = time.Millisecond; c.SlowCallRatio = 0.25 }),
			"s s s w =open", []Reason{ReasonSlowRatio}},
		{"SlowCallDuration is strict", with(func(c *Config) { c.SlowCallDuration = time.Millisecond; c.SlowCallRatio = 0.25 }),
			"s s s s =closed", nil}, // the rig records 1 ms: not slower than 1 ms
		{"OpenDuration", with(func(c *Config) { c.OpenDuration = 3 * time.Second }), "4*f +2999ms x +1ms h",
			[]Reason{ReasonErrorRatio, ReasonOpenElapsed}},
		{"OpenDuration default 5s", with(func(c *Config) { c.OpenDuration = 0 }), "4*f +4999ms x +1ms h",
			[]Reason{ReasonErrorRatio, ReasonOpenElapsed}},
		{"HalfOpenProbes", with(func(c *Config) { c.HalfOpenProbes = 3 }), "4*f +1s h h h x rs h x rs =closed",
			[]Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonProbesSucceeded}},
		{"HalfOpenSuccesses", with(func(c *Config) { c.HalfOpenSuccesses = 5 }), "4*f +1s 4*s =half-open s =closed",
			[]Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonProbesSucceeded}},
		{"HalfOpenMaxWait", with(func(c *Config) { c.HalfOpenMaxWait = 300 * time.Millisecond }), "4*f +1s h +300ms x",
			[]Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonHalfOpenTimeout}},
		{"HalfOpenMaxWait default 2×OpenDuration", with(func(c *Config) { c.HalfOpenSuccesses = 3 }), "4*f +1s s +10s h +1999ms =half-open +1ms =open",
			[]Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonHalfOpenTimeout}},
		{"WarmUp: outcomes before it are not counted", with(func(c *Config) { c.WarmUp = time.Second }),
			"10*f +999ms 10*f =closed +1ms 4*f =open", []Reason{ReasonErrorRatio}},
		{"Mode ForcedOpen at creation", with(func(c *Config) { c.Mode = ForcedOpen }), "=open x +1h x", nil},
		{"Mode ForcedClosed at creation", with(func(c *Config) { c.Mode = ForcedClosed }), "50*f =closed", nil},
		{"Mode ObserveOnly at creation", with(func(c *Config) { c.Mode = ObserveOnly }), "4*f =open f f f",
			[]Reason{ReasonErrorRatio}},
	})
}

func TestAllowErrors(t *testing.T) {
	r := newRig(t, with(func(c *Config) { c.RampDuration = 10 * time.Second; c.RampFloor = 0.01 }))
	r.run("4*f")
	_, err := r.b.Allow()
	assert.Same(t, ErrOpen, err)
	r.run("+1s h")
	_, err = r.b.Allow()
	assert.Same(t, errProbeLimit, err)
	r.run("rs s")
	_, err = r.b.Allow() // ramp-up at 1 %: the first call is shed
	assert.Same(t, errRampUp, err)
	r.b.SetMode(ForcedOpen)
	_, err = r.b.Allow()
	assert.Same(t, errForcedOpen, err)
	for _, e := range []error{errForcedOpen, errProbeLimit, errRampUp} {
		assert.ErrorIs(t, e, ErrOpen)
	}
}

func TestBackoffDoublesToCapAndResetsOnClose(t *testing.T) {
	r := newRig(t, with(func(c *Config) {
		c.OpenBackoff = 2
		c.OpenMaxDuration = 5 * time.Second
	}))
	r.run("4*f")
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i, d := range want {
		s := r.b.Snapshot()
		require.Equal(t, d, s.OpenDuration, "trial %d", i)
		require.Equal(t, d, s.RetryAfter, "trial %d", i)
		r.clock.Advance(d - time.Millisecond)
		r.run("x +1ms f") // still open 1 ms before, then a failed probe
	}
	r.run("+5s s s =closed")
	assert.Equal(t, time.Second, r.b.Snapshot().OpenDuration)
	r.run("4*f")
	assert.Equal(t, time.Second, r.b.Snapshot().RetryAfter, "a close resets the backoff")

	// The transitions report the open duration in force after them.
	var durs []time.Duration
	for _, tr := range r.transitions() {
		if tr.To == Open {
			durs = append(durs, tr.OpenDuration)
		}
	}
	assert.Equal(t, []time.Duration{1, 2, 4, 5, 5, 5, 1}, scaleSeconds(durs))
}

func scaleSeconds(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d / time.Second
	}
	return out
}

func TestBackoffDefaultCapIsTenTimes(t *testing.T) {
	r := newRig(t, with(func(c *Config) { c.OpenBackoff = 3 }))
	assert.Equal(t, 10*time.Second, r.b.Config().OpenMaxDuration)
	r.run("4*f +1s f +3s f +9s f")
	assert.Equal(t, 10*time.Second, r.b.Snapshot().OpenDuration)
}

func TestHalfOpenTimeoutBacksOff(t *testing.T) {
	r := newRig(t, with(func(c *Config) { c.OpenBackoff = 2; c.HalfOpenMaxWait = time.Second }))
	r.run("4*f +1s h +1s =open")
	assert.Equal(t, 2*time.Second, r.b.Snapshot().OpenDuration)
}

func TestWindowEmptyAfterClose(t *testing.T) {
	r := newRig(t, base())
	r.run("s s s f f =closed f =open")
	require.Equal(t, int64(6), r.b.Snapshot().Health.Requests)
	r.run("+1s s s =closed")
	assert.Equal(t, Health{}, r.b.Snapshot().Health, "the close cleared the window")
	// Three failures right after the close would have tripped the old window.
	r.run("3*f =closed")
	tr := r.transitions()
	require.Len(t, tr, 3)
	assert.Equal(t, int64(2), tr[2].Health.Requests, "the transition carries the window that closed it")
}

func TestStalePermits(t *testing.T) {
	t.Run("closed permit after the breaker opened is not a probe", func(t *testing.T) {
		r := newRig(t, base())
		r.run("h h 4*f =open +1s =half-open rf rf =half-open s =half-open s =closed")
	})
	t.Run("closed failure after opening does not count", func(t *testing.T) {
		r := newRig(t, base())
		r.run("h h 4*f rf")
		assert.Equal(t, int64(4), r.b.Snapshot().Health.Requests)
		r.run("+1s s rf =half-open")
	})
	t.Run("probe of an earlier half-open neither counts nor frees a slot", func(t *testing.T) {
		r := newRig(t, with(func(c *Config) { c.HalfOpenMaxWait = 500 * time.Millisecond }))
		r.run("4*f +1s h +500ms =open +1s h rf =half-open x")
		assert.Equal(t, 1, r.b.Snapshot().Probes)
		r.run("rs =half-open")
		assert.Equal(t, 0, r.b.Snapshot().Probes)
	})
	// Regression: a late result of a probe from an earlier half-open state
	// used to apply the due open→half-open transition itself (found by the
	// model-based test).
	t.Run("stale probe result does not move the state", func(t *testing.T) {
		r := newRig(t, with(func(c *Config) { c.HalfOpenMaxWait = 500 * time.Millisecond }))
		r.run("4*f +1s h +500ms =open +1s rf")
		assert.Equal(t, []Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonHalfOpenTimeout}, r.reasons())
	})
	t.Run("zero permit records nothing", func(t *testing.T) {
		var p Permit
		p.Record(metrics.Failure, time.Second)
	})
	t.Run("unknown outcome is ignored", func(t *testing.T) {
		r := newRig(t, with(func(c *Config) { c.MinRequests = 1 }))
		p, err := r.b.Allow()
		require.NoError(t, err)
		p.Record(metrics.Event(9), 0)
		assert.Equal(t, Health{}, r.b.Snapshot().Health)
	})
}

func TestWarmUpIgnoresOutcomes(t *testing.T) {
	r := newRig(t, with(func(c *Config) { c.WarmUp = 2 * time.Second; c.MinRequests = 1 }))
	r.run("f t f +1999ms f")
	assert.Equal(t, Health{}, r.b.Snapshot().Health)
	r.run("=closed +1ms s")
	assert.Equal(t, int64(1), r.b.Snapshot().Health.Requests)
	r.run("f =open")
}

func TestObserveOnlyNeverRefusesButReports(t *testing.T) {
	cfg := with(func(c *Config) { c.RampDuration = time.Second })
	normal := newRig(t, cfg)
	cfg.Mode = ObserveOnly
	observe := newRig(t, cfg)

	// The same traffic to both: the normal breaker refuses some calls;
	// observe-only admits them all and must go through the same states.
	refused := 0
	for _, step := range strings.Fields("s f f f +500ms f s +600ms s f +1s s s s s +300ms s s s +2s s f f f f +1s s s") {
		if step[0] == '+' {
			normal.run(step)
			observe.run(step)
			continue
		}
		o := outcomeByName[step]
		if p, err := normal.b.Allow(); err == nil {
			p.Record(o, time.Millisecond)
		} else {
			refused++
		}
		p, err := observe.b.Allow()
		require.NoError(t, err, "observe-only never refuses")
		p.Record(o, time.Millisecond)
		require.Equal(t, normal.b.State(), observe.b.State())
	}
	assert.Positive(t, refused, "the script must make the normal breaker refuse")
	require.Len(t, normal.transitions(), 8)
	assert.Equal(t, normal.transitions(), observe.transitions())
	assert.Equal(t, ObserveOnly, observe.b.Snapshot().Mode)
}

func TestForcedModesOverride(t *testing.T) {
	r := newRig(t, base())
	r.b.SetMode(ForcedClosed)
	r.run("20*f =closed")
	assert.Equal(t, int64(20), r.b.Snapshot().Health.Failures, "forced-closed still counts")
	r.run("+1h =closed")
	r.b.SetMode(ForcedOpen)
	r.run("=open +1h =open x")
	assert.Zero(t, r.b.Snapshot().RetryAfter)
	r.b.SetMode(ForcedOpen) // no change, no report
	r.b.SetMode(Mode(42))   // unknown: ignored
	assert.Equal(t, ForcedOpen, r.b.Snapshot().Mode)
	r.b.SetMode(Normal)
	r.run("=closed s")
	assert.Equal(t, Health{Requests: 1}, r.b.Snapshot().Health, "leaving forced-open restarts with an empty window")

	// Switching to observe-only and back keeps the state and reports nothing.
	r.run("3*f =open @observe-only =open s @normal x")

	tr := r.transitions()
	var got []string
	for _, t := range tr {
		got = append(got, t.From.String()+">"+t.To.String()+":"+string(t.Reason))
	}
	assert.Equal(t, []string{"closed>open:forced", "open>closed:forced", "closed>open:error_ratio"}, got)
}

func TestRampUp(t *testing.T) {
	const ramp = 100 * time.Second
	r := newRig(t, with(func(c *Config) { c.RampDuration = ramp; c.RampFloor = 0.2 }))
	r.run("4*f +1s s s =closed")
	for _, frac := range []float64{0, 0.25, 0.5, 0.75} {
		r.clock.Set(r.transitions()[2].At + time.Duration(frac*float64(ramp)))
		const n = 2000
		admitted := 0
		for range n {
			p, err := r.b.Allow()
			if err != nil {
				require.ErrorIs(t, err, errRampUp)
				continue
			}
			admitted++
			p.Record(metrics.Success, time.Millisecond)
		}
		want := 0.2 + 0.8*frac
		assert.InDelta(t, want, float64(admitted)/n, 0.05, "at %.0f%% of the ramp", frac*100)
		assert.InDelta(t, want, r.b.Snapshot().RampShare, 1e-9)
	}
	r.clock.Set(r.transitions()[2].At + ramp)
	for range 100 {
		require.NoError(t, r.call(metrics.Success, false))
	}
	assert.Equal(t, 1.0, r.b.Snapshot().RampShare)
}

func TestSnapshot(t *testing.T) {
	r := newRig(t, with(func(c *Config) { c.HalfOpenProbes = 2; c.HalfOpenSuccesses = 3 }))
	s := r.b.Snapshot()
	assert.Equal(t, "test", s.Config.Name)
	assert.Equal(t, Closed, s.State)
	assert.Empty(t, s.Transitions)
	assert.Equal(t, 1.0, s.RampShare)
	r.run("+2s s 3*f")
	s = r.b.Snapshot()
	assert.Equal(t, Open, s.State)
	assert.Equal(t, ReasonErrorRatio, s.Transitions[len(s.Transitions)-1].Reason)
	assert.Equal(t, Health{Requests: 4, Failures: 3, ErrorRatio: 0.75, ErrorBound: 0.75}, s.Health)
	assert.Zero(t, s.Since)
	r.run("+400ms")
	s = r.b.Snapshot()
	assert.Equal(t, 400*time.Millisecond, s.Since)
	assert.Equal(t, 600*time.Millisecond, s.RetryAfter)
	r.run("+600ms h s")
	s = r.b.Snapshot()
	assert.Equal(t, HalfOpen, s.State)
	assert.Equal(t, 1, s.Probes)
	assert.Equal(t, 1, s.ProbeSuccesses)
	assert.Equal(t, 3, s.Config.HalfOpenSuccesses)
	assert.Zero(t, s.RetryAfter)
}

func TestSnapshotKeepsLastEightTransitions(t *testing.T) {
	r := newRig(t, base())
	for range 5 {
		r.run("@forced-open @normal")
	}
	s := r.b.Snapshot()
	require.Len(t, s.Transitions, 8)
	assert.Equal(t, r.transitions()[2:], s.Transitions)
}

// TestSnapshotCountsEveryTransitionByKind: the counts cover every
// transition since creation, far beyond the eight the history keeps, and
// agree with the transitions the breaker reported, kind by kind.
func TestSnapshotCountsEveryTransitionByKind(t *testing.T) {
	r := newRig(t, base())
	require.Empty(t, r.b.Snapshot().TransitionCounts, "a breaker that never moved counts nothing")
	for range 6 {
		r.run("4*f +1s s f =open +1s s =half-open s =closed")
	}
	r.run("@forced-open @normal")
	want := map[TransitionCount]uint64{}
	for _, tr := range r.transitions() {
		want[TransitionCount{From: tr.From, To: tr.To, Reason: tr.Reason}]++
	}
	got := map[TransitionCount]uint64{}
	var kinds []Reason
	for _, c := range r.b.Snapshot().TransitionCounts {
		n := c.N
		c.N = 0
		got[c] = n
		kinds = append(kinds, c.Reason)
	}
	assert.Equal(t, want, got)
	assert.Equal(t, uint64(12), got[TransitionCount{From: Open, To: HalfOpen, Reason: ReasonOpenElapsed}])
	assert.Equal(t, []Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonProbeFailed, ReasonProbesSucceeded, ReasonForced, ReasonForced},
		kinds, "in the order each kind first happened")
}

func TestTransitionLogRecord(t *testing.T) {
	var buf bytes.Buffer
	clock := new(metrics.ManualClock)
	b, err := New(Config{
		Name: "db", MinRequests: 3, Clock: clock,
		Logger: slog.New(slog.NewJSONHandler(&buf, nil)),
	})
	require.NoError(t, err)
	for _, o := range []metrics.Event{metrics.Success, metrics.Timeout, metrics.Failure} {
		p, err := b.Allow()
		require.NoError(t, err)
		p.Record(o, time.Millisecond)
	}
	var rec map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec), buf.String())
	assert.Equal(t, "INFO", rec["level"])
	for k, v := range map[string]any{
		"breaker": "db", "from": "closed", "to": "open", "reason": "error_ratio",
		"requests": 3.0, "failures": 1.0, "timeouts": 1.0, "slow": 0.0,
		"error_ratio": 2.0 / 3, "slow_ratio": 0.0, "open_duration": float64(5 * time.Second),
	} {
		assert.Equal(t, v, rec[k], k)
	}
}

// OnTransition runs without the breaker's lock: it may call back into the
// breaker, and transitions it causes are delivered after it returns, in order.
func TestOnTransitionOutsideLock(t *testing.T) {
	clock := new(metrics.ManualClock)
	var b *Breaker
	var got []string
	b, err := New(Config{
		MinRequests: 1, Clock: clock, Logger: slog.New(slog.DiscardHandler),
		OnTransition: func(tr Transition) {
			got = append(got, tr.To.String()+"/"+b.State().String()+"/"+b.Snapshot().State.String())
			if tr.Reason == ReasonErrorRatio {
				b.SetMode(ForcedClosed)
			}
		},
	})
	require.NoError(t, err)
	p, err := b.Allow()
	require.NoError(t, err)
	p.Record(metrics.Failure, 0)
	assert.Equal(t, []string{"open/open/open", "closed/closed/closed"}, got)
}

func TestStateStrings(t *testing.T) {
	assert.Equal(t, []string{"closed", "open", "half-open", "state(7)"},
		[]string{Closed.String(), Open.String(), HalfOpen.String(), State(7).String()})
	assert.Equal(t, []string{"normal", "forced-open", "forced-closed", "observe-only", "mode(9)"},
		[]string{Normal.String(), ForcedOpen.String(), ForcedClosed.String(), ObserveOnly.String(), Mode(9).String()})
}

func TestAllowAndRecordDoNotAllocate(t *testing.T) {
	r := newRig(t, with(func(c *Config) { c.MinRequests = 1 << 30 }))
	allocs := testing.AllocsPerRun(1000, func() {
		p, err := r.b.Allow()
		if err != nil {
			panic(err)
		}
		p.Record(metrics.Success, time.Millisecond)
		p, _ = r.b.Allow()
		p.Record(metrics.Failure, time.Millisecond)
		ep, _ := r.b.engine().AllowAt(time.Second)
		ep.RecordAt(time.Second, metrics.Failure, time.Millisecond)
	})
	assert.Zero(t, allocs)
	r.b.SetMode(ForcedOpen)
	allocs = testing.AllocsPerRun(1000, func() {
		if _, err := r.b.Allow(); !errors.Is(err, errForcedOpen) {
			panic(err)
		}
	})
	assert.Zero(t, allocs)
}

// forbiddenClock reads 0, and fails the test when read once armed: the At
// variants must not read the breaker's clock.
type forbiddenClock struct {
	t     *testing.T
	armed bool
}

func (c *forbiddenClock) Now() time.Duration {
	if c.armed {
		c.t.Error("the breaker read its clock")
	}
	return 0
}

// AllowAt and RecordAt decide at the instant they are given, in every state:
// trip, open refusal, half-open probes, close, ramp-up.
func TestAtVariantsUseTheGivenInstant(t *testing.T) {
	var trans []Transition
	clock := &forbiddenClock{t: t}
	b, err := New(with(func(c *Config) {
		c.RampDuration = time.Second
		c.Clock = clock
		c.Logger = slog.New(slog.DiscardHandler)
		c.OnTransition = func(tr Transition) { trans = append(trans, tr) }
	}))
	require.NoError(t, err)
	clock.armed = true // New read it once
	call := func(now time.Duration, o metrics.Event) error {
		p, err := b.engine().AllowAt(now)
		if err == nil {
			p.RecordAt(now+time.Millisecond, o, time.Millisecond)
		}
		return err
	}
	for i := range 4 {
		require.NoError(t, call(time.Duration(i)*time.Millisecond, metrics.Failure))
	}
	require.Len(t, trans, 1)
	assert.Equal(t, ReasonErrorRatio, trans[0].Reason)
	assert.Equal(t, 4*time.Millisecond, trans[0].At, "stamped with RecordAt's instant")

	require.ErrorIs(t, call(500*time.Millisecond, metrics.Success), ErrOpen, "still open at 0.5 s")
	require.NoError(t, call(1004*time.Millisecond, metrics.Success), "open duration over: first probe")
	require.NoError(t, call(1100*time.Millisecond, metrics.Success), "second probe closes")
	require.Len(t, trans, 3)
	assert.Equal(t, []Reason{ReasonOpenElapsed, ReasonProbesSucceeded}, []Reason{trans[1].Reason, trans[2].Reason})
	assert.Equal(t, 1101*time.Millisecond, trans[2].At)

	// Ramp-up from the default floor: at its start most calls are shed, a
	// ramp-up's length later none is.
	shed := 0
	for range 100 {
		if errors.Is(call(1101*time.Millisecond, metrics.Success), errRampUp) {
			shed++
		}
	}
	assert.Greater(t, shed, 50)
	for range 100 {
		require.NoError(t, call(2101*time.Millisecond, metrics.Success))
	}
}

// Record and RecordAt count alike: Record is RecordAt at the clock's reading.
func TestRecordIsRecordAtNow(t *testing.T) {
	r := newRig(t, with(func(c *Config) { c.MinRequests = 1 << 30 }))
	for i, at := range []bool{false, true, false, true, true} {
		r.clock.Set(time.Duration(i) * 300 * time.Millisecond)
		p, err := r.b.Allow()
		require.NoError(t, err)
		if at {
			breaker.Permit(p).RecordAt(r.clock.Now(), metrics.Failure, time.Millisecond)
		} else {
			p.Record(metrics.Failure, time.Millisecond)
		}
	}
	// The window (1 s in 100 ms buckets) now holds those at 0.3 to 1.2 s.
	assert.EqualValues(t, 4, r.b.Snapshot().Health.Failures)
}

func TestHugeDurationsDoNotOverflow(t *testing.T) {
	r := newRig(t, with(func(c *Config) {
		c.OpenDuration = math.MaxInt64 / 2
		c.OpenBackoff = 4
		c.OpenMaxDuration = math.MaxInt64
		c.WarmUp = time.Hour
	}))
	assert.Equal(t, time.Duration(math.MaxInt64), r.b.Config().HalfOpenMaxWait, "2 × OpenDuration saturates")
	r.clock.Set(math.MaxInt64 / 4 * 3) // now + OpenDuration is past the largest Duration
	r.run("4*f =open +1h =open x")
	s := r.b.Snapshot()
	assert.Equal(t, time.Duration(math.MaxInt64/2), s.OpenDuration)
	assert.Positive(t, s.RetryAfter)
}

// The states, modes and reasons users name are the engine's: a breaker
// converts them by value.
func TestFaceConstantsAreTheEngines(t *testing.T) {
	assert.Equal(t, []breaker.State{breaker.Closed, breaker.Open, breaker.HalfOpen},
		[]breaker.State{breaker.State(Closed), breaker.State(Open), breaker.State(HalfOpen)})
	assert.Equal(t, []breaker.Mode{breaker.Normal, breaker.ForcedOpen, breaker.ForcedClosed, breaker.ObserveOnly},
		[]breaker.Mode{breaker.Mode(Normal), breaker.Mode(ForcedOpen), breaker.Mode(ForcedClosed), breaker.Mode(ObserveOnly)})
	assert.Equal(t, []breaker.Reason{breaker.ReasonErrorRatio, breaker.ReasonSlowRatio, breaker.ReasonOpenElapsed,
		breaker.ReasonProbeFailed, breaker.ReasonProbesSucceeded, breaker.ReasonHalfOpenTimeout, breaker.ReasonForced,
		breaker.ReasonReset},
		[]breaker.Reason{breaker.Reason(ReasonErrorRatio), breaker.Reason(ReasonSlowRatio), breaker.Reason(ReasonOpenElapsed),
			breaker.Reason(ReasonProbeFailed), breaker.Reason(ReasonProbesSucceeded), breaker.Reason(ReasonHalfOpenTimeout),
			breaker.Reason(ReasonForced), breaker.Reason(ReasonReset)})
}
