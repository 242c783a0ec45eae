package circuit

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/breaker"
	"github.com/bulwark-go/bulwark/metrics"
)

// refModel is a deliberately plain reimplementation of the documented rules,
// to run side by side with the breaker. It keeps every counted outcome in a
// slice with its bucket number (instant / bucket width, the alignment
// metrics.Rolling uses) instead of a ring, holds no lock and no atomic, and
// applies each rule in the most direct way.
type refModel struct {
	cfg   Config // effective
	width time.Duration

	state State
	mode  Mode
	gen   int
	since time.Duration

	events []refEvent

	openFor       time.Duration
	openUntil     time.Duration
	halfOpenUntil time.Duration
	inFlight      int
	successes     int

	ramping   bool
	rampStart time.Duration
	rampCalls int

	warmEnd time.Duration
	trans   []Transition
}

type refEvent struct {
	bucket int64
	o      metrics.Event
	slow   bool
}

type refPermit struct {
	gen  int
	kind string // "counted", "probe", "forced", "shadow"
}

func newRefModel(cfg Config, now time.Duration) *refModel {
	e := cfg.withDefaults()
	m := &refModel{cfg: e, width: e.Window.Length / time.Duration(e.Window.Buckets), mode: e.Mode,
		openFor: e.OpenDuration, warmEnd: now + e.WarmUp, since: now}
	if e.Mode == ForcedOpen {
		m.state = Open
	}
	return m
}

func (m *refModel) health(now time.Duration) Health {
	cur := int64(now / m.width)
	var h Health
	for _, e := range m.events {
		if e.bucket > cur || e.bucket <= cur-int64(m.cfg.Window.Buckets) {
			continue
		}
		h.Requests++
		switch {
		case e.o == metrics.Failure:
			h.Failures++
		case e.o == metrics.Timeout:
			h.Timeouts++
		case e.slow:
			h.Slow++
		}
	}
	if h.Requests > 0 {
		h.ErrorRatio = float64(h.Failures+h.Timeouts) / float64(h.Requests)
		h.SlowRatio = float64(h.Slow) / float64(h.Requests)
	}
	h.ErrorBound, h.SlowBound = h.ErrorRatio, h.SlowRatio // without Confidence, the ratios are judged as they are
	return h
}

func (m *refModel) isForced() bool { return m.mode == ForcedOpen || m.mode == ForcedClosed }

func (m *refModel) move(now time.Duration, to State, reason Reason) {
	if to == m.state {
		return
	}
	h := m.health(now)
	from := m.state
	m.ramping = false
	switch to {
	case Closed:
		m.events = nil
		m.openFor = m.cfg.OpenDuration
		if m.cfg.RampDuration > 0 && !m.isForced() {
			m.ramping, m.rampStart, m.rampCalls = true, now, 0
		}
	case Open:
		if from == HalfOpen && reason != ReasonForced && m.cfg.OpenBackoff > 1 {
			m.openFor = min(time.Duration(float64(m.openFor)*m.cfg.OpenBackoff), m.cfg.OpenMaxDuration)
		}
		m.openUntil = now + m.openFor
	case HalfOpen:
		m.successes, m.inFlight = 0, 0
		m.halfOpenUntil = math.MaxInt64 // no probe out: no deadline
	}
	m.state = to
	m.gen++
	m.since = now
	m.trans = append(m.trans, Transition{Name: m.cfg.Name, From: from, To: to, Reason: reason, At: now,
		Health: h, OpenDuration: m.openFor})
}

// tick applies the transitions due to time alone.
func (m *refModel) tick(now time.Duration) {
	if m.isForced() {
		return
	}
	if m.state == Open && now >= m.openUntil {
		m.move(now, HalfOpen, ReasonOpenElapsed)
	} else if m.state == HalfOpen && now >= m.halfOpenUntil {
		m.move(now, Open, ReasonHalfOpenTimeout)
	}
}

func (m *refModel) rampShare(now time.Duration) (float64, bool) {
	el := now - m.rampStart
	if el >= m.cfg.RampDuration {
		return 1, true
	}
	f := m.cfg.RampFloor
	return f + (1-f)*float64(max(el, 0))/float64(m.cfg.RampDuration), false
}

func (m *refModel) allow(now time.Duration) (refPermit, error) {
	switch m.mode {
	case ForcedOpen:
		return refPermit{}, errForcedOpen
	case ForcedClosed:
		return refPermit{m.gen, "forced"}, nil
	}
	m.tick(now)
	var refusal error
	switch m.state {
	case Closed:
		if !m.ramping {
			return refPermit{m.gen, "counted"}, nil
		}
		s, done := m.rampShare(now)
		if done {
			m.ramping = false
			return refPermit{m.gen, "counted"}, nil
		}
		k := float64(m.rampCalls)
		m.rampCalls++
		if math.Floor((k+1)*s) > math.Floor(k*s) {
			return refPermit{m.gen, "counted"}, nil
		}
		refusal = errRampUp
	case Open:
		refusal = ErrOpen
	case HalfOpen:
		if m.inFlight < m.cfg.HalfOpenProbes {
			if m.inFlight == 0 {
				m.halfOpenUntil = now + m.cfg.HalfOpenMaxWait
			}
			m.inFlight++
			return refPermit{m.gen, "probe"}, nil
		}
		refusal = errProbeLimit
	}
	if m.mode == ObserveOnly {
		return refPermit{m.gen, "shadow"}, nil
	}
	return refPermit{}, refusal
}

// releaseProbe gives back a probe slot; the last one back lifts the deadline.
func (m *refModel) releaseProbe() {
	m.inFlight--
	if m.inFlight == 0 {
		m.halfOpenUntil = math.MaxInt64
	}
}

func (m *refModel) record(p refPermit, o metrics.Event, latency, now time.Duration) {
	if p.kind == "probe" && p.gen == m.gen {
		if o == metrics.Cancelled {
			m.releaseProbe()
			return
		}
		m.tick(now) // a result after the deadline comes too late
		if p.gen != m.gen {
			return
		}
		m.releaseProbe()
	}
	if p.gen != m.gen || o == metrics.Cancelled || p.kind == "shadow" || p.kind == "" || now < m.warmEnd {
		return
	}
	slow := m.cfg.SlowCallDuration > 0 && o == metrics.Success && latency > m.cfg.SlowCallDuration
	bad := o != metrics.Success || slow
	ev := refEvent{bucket: int64(now / m.width), o: o, slow: slow}
	switch p.kind {
	case "counted", "forced":
		m.events = append(m.events, ev)
		if p.kind == "forced" || !bad || m.state != Closed || m.isForced() {
			return
		}
		h := m.health(now)
		if h.Requests < int64(m.cfg.MinRequests) {
			return
		}
		if h.ErrorRatio >= m.cfg.FailureRatio {
			m.move(now, Open, ReasonErrorRatio)
		} else if m.cfg.SlowCallDuration > 0 && h.SlowRatio >= m.cfg.SlowCallRatio {
			m.move(now, Open, ReasonSlowRatio)
		}
	case "probe":
		m.events = append(m.events, ev)
		if bad {
			m.move(now, Open, ReasonProbeFailed)
			return
		}
		m.successes++
		if m.successes >= m.cfg.HalfOpenSuccesses {
			m.move(now, Closed, ReasonProbesSucceeded)
		} else if m.inFlight > 0 {
			m.halfOpenUntil = now + m.cfg.HalfOpenMaxWait // progress: a new wait for the probes still out
		}
	}
}

func (m *refModel) setMode(mode Mode, now time.Duration) {
	m.tick(now)
	if mode == m.mode {
		return
	}
	if m.mode == ForcedClosed && mode != ForcedOpen {
		// Leaving forced-closed restarts the machine: empty window, new
		// generation, no ramp-up; the state stays closed, nothing reported.
		m.mode = mode
		m.events, m.ramping = nil, false
		m.gen++
		return
	}
	to := m.state
	if mode == ForcedOpen {
		to = Open
	} else if mode == ForcedClosed || m.isForced() {
		to = Closed
	}
	m.mode = mode
	m.move(now, to, ReasonForced)
}

func (m *refModel) currentState(now time.Duration) State {
	m.tick(now)
	return m.state
}

func (m *refModel) snapshot(now time.Duration) Snapshot {
	m.tick(now)
	s := Snapshot{State: m.state, Mode: m.mode, Since: now - m.since, OpenDuration: m.openFor,
		RampShare: 1, Health: m.health(now)}
	for _, t := range m.trans { // counted by kind, in the order each kind first happened
		i := slices.IndexFunc(s.TransitionCounts, func(c TransitionCount) bool {
			return c.From == t.From && c.To == t.To && c.Reason == t.Reason
		})
		if i < 0 {
			s.TransitionCounts = append(s.TransitionCounts, TransitionCount{From: t.From, To: t.To, Reason: t.Reason})
			i = len(s.TransitionCounts) - 1
		}
		s.TransitionCounts[i].N++
	}
	switch {
	case m.isForced():
	case m.state == Open:
		s.RetryAfter = max(m.openUntil-now, 0)
	case m.state == HalfOpen:
		s.Probes, s.ProbeSuccesses = m.inFlight, m.successes
	case m.ramping:
		s.RampShare, _ = m.rampShare(now)
	}
	s.WarmUpLeft = max(m.warmEnd-now, 0)
	return s
}

// randomConfig draws a small configuration so that every feature is reached
// within a few hundred steps.
func randomConfig(rng *rand.Rand) Config {
	pick := func(vs ...time.Duration) time.Duration { return vs[rng.IntN(len(vs))] }
	c := Config{
		Name:              "model",
		Window:            []metrics.Window{{Length: time.Second, Buckets: 10}, {Length: 800 * time.Millisecond, Buckets: 4}}[rng.IntN(2)],
		MinRequests:       1 + rng.IntN(8),
		FailureRatio:      []float64{0, 0.2, 0.5, 0.75, 1}[rng.IntN(5)],
		OpenDuration:      pick(250*time.Millisecond, time.Second, 1300*time.Millisecond),
		HalfOpenProbes:    rng.IntN(4),
		HalfOpenSuccesses: rng.IntN(5),
		HalfOpenMaxWait:   pick(0, 400*time.Millisecond, 2*time.Second),
		WarmUp:            pick(0, 0, 700*time.Millisecond),
	}
	if rng.IntN(2) == 0 {
		c.SlowCallDuration = 50 * time.Millisecond
		c.SlowCallRatio = []float64{0.3, 0.6, 1}[rng.IntN(3)]
	}
	if rng.IntN(2) == 0 {
		c.OpenBackoff = []float64{1, 1.5, 2}[rng.IntN(3)]
		c.OpenMaxDuration = pick(0, 4*time.Second)
	}
	if rng.IntN(2) == 0 {
		c.RampDuration = pick(time.Second, 2500*time.Millisecond)
		c.RampFloor = []float64{0, 0.25, 1}[rng.IntN(3)]
	}
	if rng.IntN(4) == 0 {
		c.Mode = ObserveOnly
	}
	return c
}

// TestModelBased runs thousands of random sequences of clock moves, calls,
// outcomes (in any order, including late ones on stale permits), state reads,
// snapshots and mode switches against the breaker and refModel, and requires
// them to agree at every step: admission and refusal error, state,
// transitions (with their health and open duration) and snapshot.
func TestModelBased(t *testing.T) {
	sequences, steps := 3000, 300
	if testing.Short() {
		sequences = 300
	}
	// Coverage of the generator: every reason and every refusal must show
	// up, or the test would silently stop exercising part of the machine.
	seen := map[string]int{}
	for seed := range uint64(sequences) {
		runModelSequence(t, seed, steps, seen)
		if t.Failed() {
			return
		}
	}
	for _, k := range []string{"error_ratio", "slow_ratio", "open_elapsed", "probe_failed", "probes_succeeded",
		"half_open_timeout", "forced", ErrOpen.Error(), errProbeLimit.Error(), errRampUp.Error(), errForcedOpen.Error(),
		"stale", "shadow"} {
		require.Positive(t, seen[k], "the random sequences never produced %q", k)
	}
}

func runModelSequence(t *testing.T, seed uint64, steps int, seen map[string]int) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	cfg := randomConfig(rng)
	r := newRig(t, cfg)
	m := newRefModel(cfg, r.clock.Now())
	width := m.width

	type pair struct {
		p  Permit
		rp refPermit
	}
	var held []pair
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		tail := log[max(0, len(log)-25):]
		t.Fatalf("seed %d, config %+v\nlast steps:\n  %s\n%s", seed, cfg, strings.Join(tail, "\n  "), fmt.Sprintf(format, args...))
	}
	outcome := func() (metrics.Event, time.Duration) {
		switch x := rng.IntN(10); {
		case x < 4:
			return metrics.Success, 10 * time.Millisecond
		case x < 5:
			return metrics.Success, 100 * time.Millisecond // slow when slow calls are on
		case x < 8:
			return metrics.Failure, 10 * time.Millisecond
		case x < 9:
			return metrics.Timeout, 10 * time.Millisecond
		}
		return metrics.Cancelled, 0
	}
	for step := range steps {
		now := r.clock.Now()
		switch x := rng.IntN(100); {
		case x < 25:
			d := time.Duration(rng.IntN(9)) * width / 4
			if rng.IntN(20) == 0 {
				d = 3 * time.Second
			}
			r.clock.Advance(d)
			log = append(log, fmt.Sprintf("%d +%v", step, d))
		case x < 70:
			at := rng.IntN(2) == 0
			var p Permit
			var err error
			if at {
				p, err = allowAt(r, now)
			} else {
				p, err = r.b.Allow()
			}
			rp, rerr := m.allow(now)
			log = append(log, fmt.Sprintf("%d allow (at %t) at %v: %v / model %v %q", step, at, now, err, rerr, rp.kind))
			if err != rerr {
				fail("Allow: breaker %v, model %v", err, rerr)
			}
			if err != nil {
				seen[err.Error()]++
				break
			}
			if rp.kind == "shadow" {
				seen["shadow"]++
			}
			if rng.IntN(3) > 0 {
				o, lat := outcome()
				at := record(r, rng, p, o, lat, now)
				m.record(rp, o, lat, now)
				log = append(log, fmt.Sprintf("%d   record (at %t) %v %v", step, at, o, lat))
			} else {
				held = append(held, pair{p, rp})
			}
		case x < 88:
			if len(held) == 0 {
				break
			}
			i := rng.IntN(len(held))
			h := held[i]
			held = append(held[:i], held[i+1:]...)
			if h.rp.gen != m.gen {
				seen["stale"]++
			}
			o, lat := outcome()
			at := record(r, rng, h.p, o, lat, now)
			m.record(h.rp, o, lat, now)
			log = append(log, fmt.Sprintf("%d record held (at %t) %q gen %d: %v %v at %v", step, at, h.rp.kind, h.rp.gen, o, lat, now))
		case x < 94:
			got, want := r.b.State(), m.currentState(now)
			log = append(log, fmt.Sprintf("%d State at %v: %v / model %v", step, now, got, want))
			if got != want {
				fail("State: breaker %v, model %v", got, want)
			}
		case x < 98:
			got, want := r.b.Snapshot(), m.snapshot(now)
			got.Transitions = nil // compared step by step below
			got.Config = Config{} // the rig's, with functions that do not compare
			log = append(log, fmt.Sprintf("%d Snapshot at %v", step, now))
			if !reflect.DeepEqual(got, want) {
				fail("Snapshot:\nbreaker %+v\nmodel   %+v", got, want)
			}
		default:
			mode := Mode(rng.IntN(4))
			if rng.IntN(2) == 0 {
				mode = cfg.Mode // back to where it started, more often
			}
			r.b.SetMode(mode)
			m.setMode(mode, now)
			log = append(log, fmt.Sprintf("%d SetMode %v at %v", step, mode, now))
		}
		// Every change of state is a transition, reported before the step
		// returns: agreeing on them step by step is agreeing on the state.
		if got := r.transitions(); len(got) != len(m.trans) || (len(got) > 0 && got[len(got)-1] != m.trans[len(m.trans)-1]) {
			fail("transitions:\nbreaker %+v\nmodel   %+v", got, m.trans)
		}
	}
	require.Equal(t, m.trans, r.transitions())
	for _, tr := range m.trans {
		seen[string(tr.Reason)]++
	}
}

// farOff is where the At steps of the model test move the clock while the
// breaker decides: a breaker that read its clock instead of using the
// instant it was handed would see every deadline long past.
const farOff = 1000 * time.Hour

// allowAt calls the engine's AllowAt(now) with the rig's clock moved far
// off meanwhile.
func allowAt(r *rig, now time.Duration) (Permit, error) {
	r.clock.Set(now + farOff)
	defer r.clock.Set(now)
	p, err := r.b.engine().AllowAt(now)
	return Permit(p), err
}

// record records o on p, half the time through RecordAt(now) with the rig's
// clock moved far off meanwhile, and reports whether it used RecordAt.
func record(r *rig, rng *rand.Rand, p Permit, o metrics.Event, lat, now time.Duration) bool {
	if rng.IntN(2) == 0 {
		p.Record(o, lat)
		return false
	}
	r.clock.Set(now + farOff)
	defer r.clock.Set(now)
	breaker.Permit(p).RecordAt(now, o, lat)
	return true
}
