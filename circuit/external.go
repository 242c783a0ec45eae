package circuit

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// The hooks in this file let an outside party, such as fleet state shared
// over Redis, take part in a breaker's judgment without touching its hot
// path: a closed breaker's Allow and a successful Record read nothing here.
// External counts are read only where the breaker judges (after a failure,
// timeout or slow call, and in SetExternal); the probe gate only in the
// half-open slow path; the watcher only when a transition is reported.

// Reasons of the transitions an outside party makes.
const (
	ReasonFleetOpen  Reason = "fleet_open"  // → open: the fleet opened (OpenByFleet); not a local failure
	ReasonFleetClose Reason = "fleet_close" // open or half-open → closed: the fleet's probes closed it (CloseByFleet)
)

// ErrInvalidExternal is returned by SetExternal for counts it cannot trust.
var ErrInvalidExternal = errors.New("circuit: invalid external counts")

// external holds what an outside party contributes to a breaker. Every field
// is nil when unused.
type external struct {
	counts atomic.Pointer[externalCounts]
	gate   atomic.Pointer[func() bool]
	watch  atomic.Pointer[func(Transition)]
	status atomic.Pointer[func() string]
}

// externalCounts are counts set by SetExternal, valid until the clock
// reads until.
type externalCounts struct {
	c     metrics.Counts
	until time.Duration
}

// SetExternal adds c to the window the breaker judges by, until ttl has
// passed or the breaker closes (closing clears the window and them): the
// breaker then trips on its own window plus c, and Snapshot's Health
// includes c (Snapshot.External shows c alone). A later call replaces
// earlier counts. Only Success, Failure, Timeout and Slow are read. If the
// breaker is closed (not forced) and the sum trips it, it opens here with
// reason error_ratio or slow_ratio. A negative count, or a non-positive
// ttl, is an error wrapping ErrInvalidExternal and changes nothing. The
// counts are meant to be the rest of a fleet's window (the other
// instances'), so that this breaker's own outcomes are not counted twice.
func (b *Breaker) SetExternal(c metrics.Counts, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: ttl %v must be positive", ErrInvalidExternal, ttl)
	}
	for e, n := range c {
		if n < 0 {
			return fmt.Errorf("%w: %v count %d is negative", ErrInvalidExternal, metrics.Event(e), n)
		}
	}
	now := b.clock.Now()
	b.ext.counts.Store(&externalCounts{c: c, until: satAdd(now, ttl)})
	if w := word(b.word.Load()); w.state() == Closed && !w.mode().forced() && int64(now) >= b.warmEnd.Load() {
		b.evaluate(b.cfg(), now, w.gen())
	}
	return nil
}

// ClearExternal drops the counts SetExternal set: the breaker judges by its
// own window alone.
func (b *Breaker) ClearExternal() { b.ext.counts.Store(nil) }

// externalAt returns the external counts valid at now, if any.
func (b *Breaker) externalAt(now time.Duration) (metrics.Counts, bool) {
	e := b.ext.counts.Load()
	if e == nil || now >= e.until {
		return metrics.Counts{}, false
	}
	return e.c, true
}

// judgedHealth returns the Health the breaker judges by at now: that of the
// window of settings s plus any valid external counts. It reads only the
// window's healthEvents.
func (b *Breaker) judgedHealth(s *settings, now time.Duration) Health {
	c := s.window.CountsOf(now, healthEvents)
	if e, ok := b.externalAt(now); ok {
		for i := range c {
			c[i] += e[i]
		}
	}
	return healthOf(c)
}

// LocalWindow returns the breaker's own window now (never the external
// counts): the Success, Failure, Timeout and Slow outcomes it counted, which
// is what an outside party publishes to the rest of a fleet. Closing clears
// it.
func (b *Breaker) LocalWindow() metrics.Counts { return b.cfg().window.Counts(b.clock.Now()) }

// OpenByFleet opens the breaker because the fleet it belongs to opened:
// from closed or half-open (not forced) it turns open with reason
// fleet_open for its open duration, as if it had tripped, but nothing is
// counted as a local failure. It reports whether it made the transition;
// an open or forced breaker is left as it is.
func (b *Breaker) OpenByFleet() bool {
	now := b.clock.Now()
	b.mu.Lock()
	b.advanceLocked(now)
	w := word(b.word.Load())
	ok := !w.mode().forced() && w.state() != Open
	if ok {
		b.transitionLocked(now, Open, w.mode(), ReasonFleetOpen)
	}
	b.unlockAndEmit()
	return ok
}

// CloseByFleet closes the breaker because the fleet's probes found the
// dependency healthy: from open or half-open (not forced) it turns closed
// with reason fleet_close (window cleared, ramp-up if configured). A closed
// breaker stays closed but its window and external counts are cleared too:
// its failures predate the fleet's verdict, and keeping them would reopen
// the fleet at once. It reports whether it made a transition; a forced
// breaker is left as it is.
func (b *Breaker) CloseByFleet() bool {
	now := b.clock.Now()
	b.mu.Lock()
	b.advanceLocked(now)
	w := word(b.word.Load())
	ok := false
	switch {
	case w.mode().forced():
	case w.state() == Closed:
		b.clearWindowLocked(b.cfg())
	default:
		b.transitionLocked(now, Closed, w.mode(), ReasonFleetClose)
		ok = true
	}
	b.unlockAndEmit()
	return ok
}

// SetProbeGate installs gate, consulted in the half-open state before a
// probe slot is taken: when it returns false the call is refused with
// ErrProbeLimit (admitted but not a probe in ObserveOnly mode), so that a
// fleet sends a few probes, not one per instance. gate must be fast and
// must not block or call the breaker; it runs on the caller's goroutine.
// A nil gate removes it. A half-open breaker whose gate stays closed stays
// half-open until CloseByFleet, OpenByFleet or SetMode moves it.
func (b *Breaker) SetProbeGate(gate func() bool) {
	if gate == nil {
		b.ext.gate.Store(nil)
		return
	}
	b.ext.gate.Store(&gate)
}

// probeAllowed reports whether the probe gate, if any, lets a probe out.
func (b *Breaker) probeAllowed() bool {
	g := b.ext.gate.Load()
	return g == nil || (*g)()
}

// Watch installs f, called with every transition after it is logged and
// before Config.OnTransition, in the same order and under the same rules
// (never concurrently with itself, never under the breaker's lock). f must
// not block: it is for an outside party to learn of a transition at once
// (for instance to publish an opening to the fleet). A nil f removes it;
// a new f replaces the previous one.
func (b *Breaker) Watch(f func(Transition)) {
	if f == nil {
		b.ext.watch.Store(nil)
		return
	}
	b.ext.watch.Store(&f)
}

// notifyWatch passes t to the watcher, if any.
func (b *Breaker) notifyWatch(t Transition) {
	if f := b.ext.watch.Load(); f != nil {
		(*f)(t)
	}
}

// SetSharedStatus installs status, whose answer Snapshot reports as Shared:
// how the outside party sharing this breaker's state is doing (for example
// "shared state: degraded (…)"), for dashboards. status must be fast and
// must not call the breaker. A nil status removes it.
func (b *Breaker) SetSharedStatus(status func() string) {
	if status == nil {
		b.ext.status.Store(nil)
		return
	}
	b.ext.status.Store(&status)
}

// sharedStatus returns the shared-state status, or "" with none installed.
func (b *Breaker) sharedStatus() string {
	if f := b.ext.status.Load(); f != nil {
		return (*f)()
	}
	return ""
}
