package circuit

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// ErrOpen is the error of every refusal: Allow returns it, or one of
// ErrForcedOpen, ErrProbeLimit and ErrRampUp, which wrap it, so
// errors.Is(err, ErrOpen) holds for all.
var ErrOpen = errors.New("circuit: open")

// Refusals more specific than ErrOpen. Each wraps ErrOpen.
var (
	ErrForcedOpen = fmt.Errorf("%w: forced open", ErrOpen)                     // the mode is ForcedOpen
	ErrProbeLimit = fmt.Errorf("%w: half-open, probes all in flight", ErrOpen) // half-open and HalfOpenProbes already out
	ErrRampUp     = fmt.Errorf("%w: shed during ramp-up", ErrOpen)             // closed, ramping up, and this call was shed
)

// Breaker is a circuit breaker. Create one with New. A Breaker is safe for
// concurrent use; Allow and Permit.Record take no lock and allocate nothing
// while it is closed.
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
	health   healthChecker

	closes    uint64 // transitions to Closed so far, under mu (Member.Look)
	lastClose Reason // reason of the last of them, under mu

	party     atomic.Pointer[Member]      // the outside party that joined, if any (party.go)
	observers atomic.Pointer[[]*observer] // Observe's functions; replaced whole under mu
}

// New returns a breaker for cfg, or an error wrapping ErrInvalidConfig that
// names the first invalid field. The breaker starts closed (open in
// ForcedOpen mode) with an empty window.
func New(cfg Config) (*Breaker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	eff := cfg.WithDefaults()
	window, err := metrics.NewRolling(eff.Window, metrics.CountsOnly)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	now := eff.Clock.Now()
	b := &Breaker{
		clock:   eff.Clock,
		since:   now,
		openFor: eff.OpenDuration,
	}
	b.settings.Store(b.derive(eff, window))
	b.warmEnd.Store(int64(satAdd(now, eff.WarmUp)))
	b.health.init()
	state := Closed
	if eff.Mode == ForcedOpen {
		state = Open
	}
	b.word.Store(uint64(makeWord(state, eff.Mode, false, 0)))
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

// Allow asks to make one call. It returns a Permit to Record the outcome on,
// or a refusal: ErrOpen (open), ErrProbeLimit (half-open, all probe slots in
// flight), ErrRampUp (shed during ramp-up) or ErrForcedOpen; each satisfies
// errors.Is(err, ErrOpen). In ObserveOnly mode it never refuses. It does not
// block; an open breaker whose open duration has elapsed turns half-open here,
// and this call becomes its first probe. Allow does not allocate, and reads
// the clock only when the breaker is not simply closed (open, half-open or
// ramping up).
func (b *Breaker) Allow() (Permit, error) { return b.allow(0, false) }

// AllowAt is Allow at instant now, for a caller that has just read the clock
// anyway: it never reads the clock itself. now must be a reading of the
// breaker's Clock (Config.Clock) taken for this call, at most shortly before
// it; an instant from another clock, or a stale one, makes the breaker
// decide on the wrong time (it may stay open longer or start ramp-up shares
// late).
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

// Record reports how the permitted call went and how long it took. Call it
// (or RecordAt) exactly once per permit; a second call may be counted again.
// Only Success, Failure and Timeout count (any other value is treated as
// Ignored). A success slower than SlowCallDuration is a slow call. Outcomes
// of a stale permit, of a call during warm-up, and of an ObserveOnly call the
// breaker would have refused are not counted. Record does not allocate and,
// while the breaker is closed, takes no lock unless the outcome trips it (a
// half-open probe's Record takes it). It reads the clock once when the
// outcome counts.
func (p Permit) Record(o Outcome, latency time.Duration) { p.record(0, false, o, latency) }

// RecordAt is Record at instant now, for a caller that has just read the
// clock anyway (at the end of the call): it never reads the clock itself.
// now must be a reading of the breaker's Clock (Config.Clock) taken when the
// call ended, after Allow returned this permit; the outcome is counted in
// the window bucket of now, and a transition it causes is stamped with now.
func (p Permit) RecordAt(now time.Duration, o Outcome, latency time.Duration) {
	p.record(now, true, o, latency)
}

// record is Record, with now valid when clocked is set.
func (p Permit) record(now time.Duration, clocked bool, o Outcome, latency time.Duration) {
	b := p.b
	switch p.kind {
	case permitClosed, permitForced:
		if o >= Ignored || word(b.word.Load()).gen() != p.gen {
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
		if p.kind == permitClosed && (o != Success || slow) {
			b.evaluate(c, now, p.gen)
		}
	case permitProbe:
		if o >= Ignored {
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

// add counts one outcome (and, if it was slow, a Slow event) in the window,
// with one bucket lookup, and reports whether it was slow.
func (c *settings) add(now time.Duration, o Outcome, latency time.Duration) bool {
	var events metrics.EventSet
	switch o {
	case Success:
		events.Add(metrics.Success)
	case Failure:
		events.Add(metrics.Failure)
	case Timeout:
		events.Add(metrics.Timeout)
	}
	slow := c.slowOn && o == Success && latency > c.SlowCallDuration
	if slow {
		events.Add(metrics.Slow)
	}
	c.window.Record(now, events, metrics.NoLatency, metrics.NoLatency)
	return slow
}

// verdict returns the reason to trip for health h, or "" to stay closed.
func (c *settings) verdict(h Health) Reason {
	switch {
	case h.Requests < int64(c.MinRequests):
		return ""
	case h.ErrorRatio >= c.FailureRatio:
		return ReasonErrorRatio
	case c.slowOn && h.SlowRatio >= c.SlowCallRatio:
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
func (b *Breaker) recordProbe(now time.Duration, gen uint32, o Outcome, latency time.Duration) {
	b.mu.Lock()
	if word(b.word.Load()).gen() == gen {
		b.advanceLocked(now)
	}
	if c := b.cfg(); b.releaseProbeLocked(gen) && int64(now) >= b.warmEnd.Load() {
		w := word(b.word.Load())
		slow := c.add(now, o, latency)
		switch failed := o != Success || slow; {
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

// SetMode switches the mode at run time. ForcedOpen and ForcedClosed pin the
// effective state (open or closed) and stop the state machine; leaving a
// forced mode for Normal or ObserveOnly restarts it closed, with an empty
// window (outcomes counted while forced closed are dropped, and a call
// admitted then that ends later is not counted). Leaving ForcedOpen starts a
// ramp-up if RampUp is set; leaving ForcedClosed does not (calls were
// flowing). Switching between Normal and ObserveOnly keeps the current state.
// When the effective state changes, a transition with reason "forced" is
// reported. An unknown mode is ignored.
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

// Reset restarts the breaker closed, as if new, in one transition with
// reason reset: the window is cleared, the open duration goes back to
// OpenDuration, half-open progress is dropped and permits issued before are
// stale. A forced mode is left for Normal; Normal and ObserveOnly stay. No
// ramp-up starts (an operator has judged the dependency healthy), and a
// warm-up in progress goes on. The transition is reported from whatever
// state the breaker was in, closed included, so that every reset shows in
// the log and the history.
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

// State returns the effective state, after applying any transition that time
// alone has made due (open → half-open, half-open timeout).
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

// Config returns the effective configuration (defaults applied), as of the
// last Reconfigure. Its Mode is the initial mode; Snapshot tells the
// current one.
func (b *Breaker) Config() Config { return b.cfg().Config }

// Snapshot describes a breaker at one instant.
type Snapshot struct {
	Name         string
	State        State         // effective state
	Mode         Mode          // current mode
	Since        time.Duration // time in the current state: since the last transition, or since creation
	LastReason   Reason        // reason of the last transition; "" if none
	OpenDuration time.Duration // open duration in force (backed off after failed trials)
	RetryAfter   time.Duration // Open (not forced): time left before it turns half-open; else 0

	// Half-open progress: probes in flight, consecutive probe successes so
	// far, and how many close the breaker (HalfOpenSuccesses). Probes and
	// ProbeSuccesses are 0 outside the half-open state.
	Probes, ProbeSuccesses, ProbesNeeded int

	RampShare   float64      // share of calls admitted now; 1 when not ramping up
	Health      Health       // the window now
	Transitions []Transition // the last few transitions, oldest first, at most 8

	// The thresholds the breaker judges Health by (its Config, defaults
	// applied): what a dashboard shows beside it.
	MinRequests      int
	FailureRatio     float64
	SlowCallDuration time.Duration // 0: slow-call detection off
	SlowCallRatio    float64

	// ProbeFailures is the count of consecutive failed probes in the
	// current half-open state (0 outside it); HalfOpenFailures of them
	// reopen the breaker.
	ProbeFailures int
	// WarmingUp says that outcomes are not counted now (Config.WarmUp after
	// creation, or a WarmUp call); WarmUpLeft is how long that lasts.
	WarmingUp  bool
	WarmUpLeft time.Duration
	// HealthCheck tells the health check's state; the zero value when
	// Config.HealthCheck is nil.
	HealthCheck HealthCheckStatus
	// ConfigGeneration counts the accepted Reconfigure calls: 0 as created.
	ConfigGeneration uint64
	// Shared is the status of the party that joined the breaker
	// (Party.Status); "" when the breaker judges alone.
	Shared string
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
		Name:         c.Name,
		State:        w.state(),
		Mode:         w.mode(),
		Since:        now - b.since,
		OpenDuration: b.openFor,
		ProbesNeeded: c.HalfOpenSuccesses,
		RampShare:    1,
		Health:       c.health(now),
		Transitions:  append([]Transition(nil), b.history...),

		MinRequests:      c.MinRequests,
		FailureRatio:     c.FailureRatio,
		SlowCallDuration: c.SlowCallDuration,
		SlowCallRatio:    c.SlowCallRatio,

		ConfigGeneration: c.generation,
	}
	if n := len(b.history); n > 0 {
		s.LastReason = b.history[n-1].Reason
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
	s.WarmingUp = s.WarmUpLeft > 0
	s.HealthCheck = b.healthStatus()
	s.Shared = b.sharedStatus()
	return s
}
