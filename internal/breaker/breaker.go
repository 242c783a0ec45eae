package breaker

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/internal/windowed"
	"github.com/bulwark-go/bulwark/metrics"
)

// ErrOpen is the error of every refusal: Allow returns it, or one of
// ErrForcedOpen, ErrProbeLimit and ErrRampUp, which wrap it, so
// errors.Is(err, ErrOpen) holds for all. Package circuit exports them.
var ErrOpen = errors.New("circuit: open")

// Refusals more specific than ErrOpen. Each wraps ErrOpen.
var (
	ErrForcedOpen = fmt.Errorf("%w: forced open", ErrOpen)                     // the mode is ForcedOpen
	ErrProbeLimit = fmt.Errorf("%w: half-open, probes all in flight", ErrOpen) // half-open and HalfOpenProbes already out
	ErrRampUp     = fmt.Errorf("%w: shed during ramp-up", ErrOpen)             // closed, ramping up, and this call was shed
)

// Breaker is a circuit breaker: circuit.Breaker is this type, with the
// methods a user may call. Create one with circuit.New. A Breaker is safe
// for concurrent use; Allow and Permit.Record take no lock and allocate
// nothing while it is closed.
type Breaker struct {
	// Read on every call: the packed state word (see word).
	word atomic.Uint64

	// Half-open probe slots: generation<<32 | probes in flight, written
	// under mu and read without it to refuse a full house lock-free.
	// Packing the generation in lets a late caller of an earlier half-open
	// state see that its slot went with that state.
	probes atomic.Uint64

	// Deadlines and ramp-up state, written under mu before the state word
	// that makes them relevant is published.
	openUntil     atomic.Int64  // Open: when it turns half-open
	halfOpenUntil atomic.Int64  // HalfOpen: when the probes in flight time out; MaxInt64 with none out
	rampStart     atomic.Int64  // Closed with ramp bit: when the ramp began
	rampCount     atomic.Uint64 // calls seen by the ramp so far

	// The effective settings, replaced whole by Reconfigure. Read with
	// cfg(), once per decision, so one decision sees one configuration.
	settings atomic.Pointer[settings]
	clock    metrics.Clock

	mu        sync.Mutex
	since     time.Duration // when the current state was entered
	openFor   time.Duration // current (backed-off) open duration
	successes int           // probe successes in the current half-open state
	history   []Transition  // last historySize transitions
	pending   []Transition  // made but not yet reported
	emitting  bool          // a goroutine is reporting pending transitions

	warmEnd  atomic.Int64 // outcomes recorded before this instant are not counted (WarmUp)
	failures int          // consecutive probe failures in the current half-open state, under mu

	closes    uint64            // transitions to Closed so far, under mu (Member.Look)
	lastClose Reason            // reason of the last of them, under mu
	counts    []TransitionCount // transitions so far by from, to and reason, under mu

	party     atomic.Pointer[Member]      // the outside party that joined, if any (party.go)
	checker   atomic.Pointer[Checker]     // the health checker started on it, if any (healthcheck.go); set and cleared under mu
	observers atomic.Pointer[[]*observer] // Observe's functions; replaced whole under mu
}

// New returns a breaker that runs on s, which its caller has validated
// (package circuit: Config.Validate); the error is the window's, if its
// shape is invalid. The breaker starts closed (open in ForcedOpen mode)
// with an empty window.
func New(s Settings) (*Breaker, error) {
	window, err := windowed.NewTally(s.Window, healthEvents)
	if err != nil {
		return nil, err
	}
	now := s.Clock.Now()
	b := &Breaker{
		clock:   s.Clock,
		since:   now,
		openFor: s.OpenDuration,
	}
	b.settings.Store(derive(s, window))
	b.warmEnd.Store(int64(satAdd(now, s.WarmUp)))
	state := Closed
	if s.Mode == ForcedOpen {
		state = Open
	}
	b.word.Store(uint64(makeWord(state, s.Mode, false, 0)))
	return b, nil
}

// permitKind says how Record treats a permit.
type permitKind uint8

const (
	permitNone   permitKind = iota // zero Permit: Record does nothing
	permitClosed                   // closed state: counted, may trip the breaker
	permitProbe                    // half-open probe: holds a probe slot
	permitForced                   // ForcedClosed: counted, never trips
	permitShadow                   // ObserveOnly admission of a call the breaker would refuse: not counted
)

// Permit is the breaker's admission of one call. It is a small value; pass
// it along and call Record exactly once when the call ends. It remembers the
// state generation that issued it: if the breaker has changed state since, the
// outcome is stale and not counted (a closed-state call that ends after the
// breaker opened is not a probe result). The zero Permit records nothing.
type Permit struct {
	b    *Breaker
	gen  uint32
	kind permitKind
}

// IsProbe reports whether p admits a half-open probe: a call that tests
// whether the dependency has recovered, whose result closes or reopens the
// breaker. A caller can tag such a call (a header, a log field) so that the
// dependency's own logs count probes apart from normal traffic.
func (p Permit) IsProbe() bool { return p.kind == permitProbe }

// Allow is circuit.Breaker.Allow.
func (b *Breaker) Allow() (Permit, error) { return b.allow(0, false) }

// AllowAt is Allow at instant now, for a caller that has just read the clock
// anyway: it never reads the clock itself. now must be a reading of the
// breaker's clock (Settings.Clock) taken for this call, at most shortly
// before it; an instant from another clock, or a stale one, makes the
// breaker decide on the wrong time (it may stay open longer or start
// ramp-up shares late). That caveat is why users do not get it: package
// command calls it with the reading it takes at the call's start anyway,
// on a breaker it created with its own clock.
func (b *Breaker) AllowAt(now time.Duration) (Permit, error) { return b.allow(now, true) }

// allow is Allow, with now valid when clocked is set.
func (b *Breaker) allow(now time.Duration, clocked bool) (Permit, error) {
	w := word(b.word.Load())
	if w&fastMask == 0 { // closed, normal mode, no ramp-up
		return Permit{b: b, gen: w.gen(), kind: permitClosed}, nil
	}
	return b.allowSlow(w, now, clocked)
}

// allowSlow decides the calls the fast path does not: forced modes, ramp-up,
// open and half-open. It reads the clock, once, unless clocked says now holds
// the call's instant already.
func (b *Breaker) allowSlow(w word, now time.Duration, clocked bool) (Permit, error) {
	for {
		mode := w.mode()
		switch mode {
		case ForcedOpen:
			return Permit{}, ErrForcedOpen
		case ForcedClosed:
			return Permit{b: b, gen: w.gen(), kind: permitForced}, nil
		}
		if !w.ramp() && w.state() == Closed {
			return Permit{b: b, gen: w.gen(), kind: permitClosed}, nil
		}
		if !clocked {
			now, clocked = b.clock.Now(), true
		}
		refusal := ErrOpen
		switch w.state() {
		case Closed:
			if b.rampAdmit(w, now) {
				return Permit{b: b, gen: w.gen(), kind: permitClosed}, nil
			}
			refusal = ErrRampUp
		case Open:
			if int64(now) >= b.openUntil.Load() {
				w = b.advance(now)
				continue
			}
		case HalfOpen:
			if int64(now) >= b.halfOpenUntil.Load() {
				w = b.advance(now)
				continue
			}
			if !b.probeAllowed() {
				refusal = ErrProbeLimit
				break
			}
			ok, stale := b.acquireProbe(w.gen(), now)
			if stale {
				w = word(b.word.Load())
				continue
			}
			if ok {
				return Permit{b: b, gen: w.gen(), kind: permitProbe}, nil
			}
			refusal = ErrProbeLimit
		}
		if mode == ObserveOnly {
			return Permit{b: b, gen: w.gen(), kind: permitShadow}, nil
		}
		return Permit{}, refusal
	}
}

// advance applies the transitions that time alone causes (open → half-open,
// half-open → open when the probes in flight outlast HalfOpenMaxWait) as of
// now, and returns the state word.
func (b *Breaker) advance(now time.Duration) word {
	b.mu.Lock()
	b.advanceLocked(now)
	w := word(b.word.Load())
	b.unlockAndEmit()
	return w
}

// advanceLocked is advance with b.mu held. A lazy transition is stamped with
// the instant it is observed, not the instant it became due: an idle breaker
// that is looked at an hour after its open duration ran out turns half-open
// then.
func (b *Breaker) advanceLocked(now time.Duration) {
	w := word(b.word.Load())
	if w.mode().forced() {
		return
	}
	switch w.state() {
	case Open:
		if int64(now) >= b.openUntil.Load() {
			b.transitionLocked(now, HalfOpen, w.mode(), ReasonOpenElapsed)
		}
	case HalfOpen:
		if int64(now) >= b.halfOpenUntil.Load() {
			b.transitionLocked(now, Open, w.mode(), ReasonHalfOpenTimeout)
		}
	}
}

// rampAdmit decides one call during ramp-up. The k-th call since the ramp
// began (k from 0) is admitted iff floor((k+1)·s) > floor(k·s), where s is the
// share due now: over any run of calls the admitted fraction tracks s within
// one call, deterministically. Once the ramp is over it clears the ramp bit
// so later calls take the fast path.
func (b *Breaker) rampAdmit(w word, now time.Duration) bool {
	s, done := b.rampShare(now)
	if done {
		b.word.CompareAndSwap(uint64(w), uint64(w&^rampBit))
		return true
	}
	k := float64(b.rampCount.Add(1) - 1)
	return math.Floor((k+1)*s) > math.Floor(k*s)
}

// rampShare returns the share of calls admitted at now, and whether the ramp
// is over: RampUp has elapsed or the schedule has reached 1. It may call
// Config.RampFunc, so it must not be called with b.mu held.
func (b *Breaker) rampShare(now time.Duration) (float64, bool) {
	c := b.cfg()
	elapsed := max(now-time.Duration(b.rampStart.Load()), 0)
	if elapsed >= c.RampUp {
		return 1, true
	}
	if share := b.scheduledShare(c, elapsed); share < 1 {
		return share, false
	}
	return 1, true
}

// acquireProbe takes a probe slot of half-open generation gen at instant now.
// stale reports that the breaker has left that half-open state. A full house
// is refused without the lock; a slot is taken under it, so that the first
// probe out starts the probe deadline in step with the slot count, and only
// while the breaker is still in that half-open state.
func (b *Breaker) acquireProbe(gen uint32, now time.Duration) (ok, stale bool) {
	c := b.cfg()
	limit := uint64(c.HalfOpenProbes)
	if p := b.probes.Load(); uint32(p>>genShift) != gen {
		return false, true
	} else if p&math.MaxUint32 >= limit {
		return false, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.probes.Load()
	switch {
	case word(b.word.Load()).gen() != gen:
		return false, true
	case p&math.MaxUint32 >= limit:
		return false, false
	case p&math.MaxUint32 == 0:
		b.halfOpenUntil.Store(int64(satAdd(now, c.HalfOpenMaxWait)))
	}
	b.probes.Store(p + 1)
	return true, false
}

// releaseProbeLocked gives back a probe slot of half-open generation gen,
// with b.mu held. It reports false if that half-open state is over (the slot
// went with it) or no slot is out. The last slot back lifts the probe
// deadline: a half-open state with no probe out waits for traffic, however
// sparse.
func (b *Breaker) releaseProbeLocked(gen uint32) bool {
	p := b.probes.Load()
	if word(b.word.Load()).gen() != gen || p&math.MaxUint32 == 0 {
		return false
	}
	b.probes.Store(p - 1)
	if p&math.MaxUint32 == 1 {
		b.halfOpenUntil.Store(math.MaxInt64)
	}
	return true
}

// Record is circuit.Permit.Record.
func (p Permit) Record(o metrics.Event, latency time.Duration) { p.record(0, false, o, latency) }

// RecordAt is Record at instant now, for a caller that has just read the
// clock anyway (at the end of the call): it never reads the clock itself.
// now must be a reading of the breaker's clock (Settings.Clock) taken when the
// call ended, after Allow returned this permit; the outcome is counted in
// the window bucket of now, and a transition it causes is stamped with now.
func (p Permit) RecordAt(now time.Duration, o metrics.Event, latency time.Duration) {
	p.record(now, true, o, latency)
}

// record is Record, with now valid when clocked is set.
func (p Permit) record(now time.Duration, clocked bool, o metrics.Event, latency time.Duration) {
	b := p.b
	switch p.kind {
	case permitClosed, permitForced:
		if o > metrics.Timeout || word(b.word.Load()).gen() != p.gen {
			return
		}
		if !clocked {
			now = b.clock.Now()
		}
		c := b.cfg()
		if int64(now) < b.warmEnd.Load() {
			return
		}
		slow := c.add(now, o, latency)
		if p.kind == permitClosed && (o != metrics.Success || slow) {
			b.evaluate(c, now, p.gen)
		}
	case permitProbe:
		if o > metrics.Timeout {
			b.mu.Lock()
			b.releaseProbeLocked(p.gen)
			b.mu.Unlock()
			return
		}
		if !clocked {
			now = b.clock.Now()
		}
		b.recordProbe(now, p.gen, o, latency)
	}
}

// add counts one outcome (Success, Failure or Timeout; and, if it was slow,
// a Slow event) in the window, with one bucket lookup, and reports whether
// it was slow.
func (c *settings) add(now time.Duration, o metrics.Event, latency time.Duration) bool {
	var events metrics.EventSet
	switch o { // constant bits: cheaper than a shift by o
	case metrics.Success:
		events.Add(metrics.Success)
	case metrics.Failure:
		events.Add(metrics.Failure)
	case metrics.Timeout:
		events.Add(metrics.Timeout)
	}
	slow := c.slowOn && o == metrics.Success && latency > c.SlowCallDuration
	if slow {
		events.Add(metrics.Slow)
	}
	c.window.Record(now, events)
	return slow
}

// verdict returns the reason to trip for health h, or "" to stay closed.
func (c *settings) verdict(h Health) Reason {
	switch {
	case h.Requests < int64(c.MinRequests):
		return ""
	case h.ErrorBound >= c.FailureRatio:
		return ReasonErrorRatio
	case c.slowOn && h.SlowBound >= c.SlowCallRatio:
		return ReasonSlowRatio
	}
	return ""
}

// evaluate trips the closed breaker of generation gen if the window of
// settings c says so. Only a failure,
// timeout or slow call calls it: a success never trips.
func (b *Breaker) evaluate(c *settings, now time.Duration, gen uint32) {
	reason := c.verdict(c.health(now))
	if reason == "" {
		return
	}
	b.mu.Lock()
	w := word(b.word.Load())
	if w.gen() == gen && w.state() == Closed && !w.mode().forced() {
		b.transitionLocked(now, Open, w.mode(), reason)
	}
	b.unlockAndEmit()
}

// recordProbe gives back the slot of a probe of half-open generation gen and
// applies its result (Success, Failure or Timeout), at instant now. A result
// that comes after the probe deadline first times the state out, so it is
// stale. A result that neither closes nor reopens the breaker (a success
// short of HalfOpenSuccesses, a failure short of HalfOpenFailures) is
// progress: the probes still out get a new HalfOpenMaxWait from now.
func (b *Breaker) recordProbe(now time.Duration, gen uint32, o metrics.Event, latency time.Duration) {
	b.mu.Lock()
	if word(b.word.Load()).gen() == gen {
		b.advanceLocked(now)
	}
	if c := b.cfg(); b.releaseProbeLocked(gen) && int64(now) >= b.warmEnd.Load() {
		w := word(b.word.Load())
		slow := c.add(now, o, latency)
		switch failed := o != metrics.Success || slow; {
		case failed && b.probeFailedLocked(c):
			b.transitionLocked(now, Open, w.mode(), ReasonProbeFailed)
		case !failed && b.probeSucceededLocked(c):
			b.transitionLocked(now, Closed, w.mode(), ReasonProbesSucceeded)
		case b.probes.Load()&math.MaxUint32 > 0:
			b.halfOpenUntil.Store(int64(satAdd(now, c.HalfOpenMaxWait)))
		}
	}
	b.unlockAndEmit()
}

// SetMode is circuit.Breaker.SetMode; an unknown mode is ignored.
func (b *Breaker) SetMode(m Mode) {
	if m > ObserveOnly {
		return
	}
	now := b.clock.Now()
	b.mu.Lock()
	b.advanceLocked(now)
	w := word(b.word.Load())
	switch {
	case m == w.mode():
	case w.mode() == ForcedClosed && !m.forced():
		b.restartLocked(now, m)
	case m == ForcedOpen:
		b.transitionLocked(now, Open, m, ReasonForced)
	case m == ForcedClosed, w.mode().forced():
		b.transitionLocked(now, Closed, m, ReasonForced)
	default:
		b.transitionLocked(now, w.state(), m, ReasonForced)
	}
	b.unlockAndEmit()
}

// Reset is circuit.Breaker.Reset: it restarts the breaker closed, as if
// new, in one transition with reason reset, from any state (closed too).
func (b *Breaker) Reset() {
	now := b.clock.Now()
	b.mu.Lock()
	m := word(b.word.Load()).mode()
	if m.forced() {
		m = Normal
	}
	b.transitionLocked(now, Closed, m, ReasonReset)
	b.unlockAndEmit()
}

// restartLocked restarts the state machine closed in mode m at now, when
// leaving ForcedClosed: the window is emptied and a new generation begins
// (permits issued while forced closed are stale), with no ramp-up. The
// effective state stays closed, so nothing is reported. b.mu must be held.
func (b *Breaker) restartLocked(now time.Duration, m Mode) {
	b.cfg().window.Reset()
	b.word.Store(uint64(makeWord(Closed, m, false, word(b.word.Load()).gen()+1)))
}

// State is circuit.Breaker.State.
func (b *Breaker) State() State {
	w := word(b.word.Load())
	if w.state() == Closed || w.mode().forced() {
		return w.state()
	}
	now := b.clock.Now()
	if (w.state() == Open && int64(now) >= b.openUntil.Load()) ||
		(w.state() == HalfOpen && int64(now) >= b.halfOpenUntil.Load()) {
		w = b.advance(now)
	}
	return w.state()
}

// Settings returns the settings in force: as of the last Reconfigure. Its
// Mode is the initial mode; Snapshot tells the current one.
func (b *Breaker) Settings() Settings { return b.cfg().Settings }

// Snapshot describes a breaker at one instant: what circuit.Snapshot
// shows, and the configuration generation.
type Snapshot struct {
	Settings     Settings      // in force
	Generation   uint64        // accepted Reconfigure calls: 0 as created
	State        State         // effective state
	Mode         Mode          // current mode
	Since        time.Duration // time in the current state: since the last transition, or since creation
	OpenDuration time.Duration // open duration in force (backed off after failed trials)
	RetryAfter   time.Duration // Open (not forced): time left before it turns half-open; else 0

	// Half-open progress (0 outside the half-open state): probes in
	// flight, and consecutive probe successes and failures so far.
	Probes, ProbeSuccesses, ProbeFailures int

	RampShare   float64           // share of calls admitted now; 1 when not ramping up
	Health      Health            // the window now
	Transitions []Transition      // the last few transitions, oldest first, at most 8
	Counts      []TransitionCount // every transition since creation, by kind, in order of first occurrence
	WarmUpLeft  time.Duration     // how long outcomes are not counted yet (warm-up); 0: counted
	HealthCheck string            // the health checker's progress (Checker.status); "" without one
	Shared      string            // the party's status (Party.Status); "" when the breaker judges alone
}

// Snapshot returns the breaker's current state, progress, health and recent
// transitions. Like Allow, it first applies any transition that time alone
// has made due. It allocates (the copy of the transition history).
func (b *Breaker) Snapshot() Snapshot {
	now := b.clock.Now()
	b.mu.Lock()
	b.advanceLocked(now)
	w := word(b.word.Load())
	c := b.cfg()
	s := Snapshot{
		Settings:     c.Settings,
		Generation:   c.generation,
		State:        w.state(),
		Mode:         w.mode(),
		Since:        now - b.since,
		OpenDuration: b.openFor,
		RampShare:    1,
		Health:       c.health(now),
		Transitions:  append([]Transition(nil), b.history...),
		Counts:       append([]TransitionCount(nil), b.counts...),
	}
	switch {
	case w.mode().forced():
	case w.state() == Open:
		s.RetryAfter = max(time.Duration(b.openUntil.Load())-now, 0)
	case w.state() == HalfOpen:
		if p := b.probes.Load(); uint32(p>>genShift) == w.gen() {
			s.Probes = int(p & math.MaxUint32)
		}
		s.ProbeSuccesses, s.ProbeFailures = b.successes, b.failures
	}
	b.unlockAndEmit()
	if w.ramp() && !w.mode().forced() {
		s.RampShare, _ = b.rampShare(now) // may call RampFunc: not under b.mu
	}
	s.WarmUpLeft = max(time.Duration(b.warmEnd.Load())-now, 0)
	s.HealthCheck = b.healthStatus()
	s.Shared = b.sharedStatus()
	return s
}
