package breaker

import (
	"fmt"

	"github.com/bulwark-go/bulwark/metrics"
)

// An outside party takes part in a breaker's judgment through one small
// interface: it implements Party, joins with Breaker.Join, and acts through
// the Member it gets back. Package circuit/party's Party, Join, Member and
// Look are these, documented for users (the fleet of module redis uses them).
// A closed breaker's Allow and a successful Record read nothing of it: the
// party's probe gate is asked only in the half-open slow path, its status
// only by Snapshot.

// Reasons of the transitions a Party makes through its Member.
const (
	ReasonFleetOpen  Reason = "fleet_open"  // closed → open (Member.Open)
	ReasonFleetClose Reason = "fleet_close" // open or half-open → closed (Member.Close)
)

// Party is an outside party taking part in a breaker's judgment.
type Party interface {
	// MayProbe is asked in the half-open state before a probe slot is
	// taken: false refuses the call with ErrProbeLimit (in ObserveOnly
	// mode it is admitted, not as a probe), so that a fleet sends a few
	// probes, not one set per instance. It runs on the caller's goroutine:
	// it must be fast, must not block and must not call the breaker. A
	// half-open breaker whose party keeps answering false stays half-open,
	// so a party that cannot coordinate must answer true.
	MayProbe() bool
	// Status is what Snapshot reports as Shared: how the party is doing
	// (for example "shared state: degraded (…)"), for dashboards. It must
	// be fast and must not call the breaker.
	Status() string
}

// Member is a party's handle on the breaker it joined. It is safe for
// concurrent use. After Leave, Open and Close do nothing and return false.
type Member struct {
	b *Breaker
	p Party
}

// Look is a breaker read at one instant by Member.Look: what a party
// publishes of it, and the instant its decisions refer to.
type Look struct {
	State  State          // effective state
	Window metrics.Counts // the breaker's own window: Success, Failure, Timeout and Slow counts
	// Closes counts the transitions to Closed since the breaker was
	// created, and LastClose is the reason of the last one ("" before
	// any): a party that compares two Looks learns that the breaker
	// closed in between, and why, even before the transition is reported.
	Closes    uint64
	LastClose Reason
	gen       uint32
}

// Join makes p take part in b's judgment: from now on b asks p.MayProbe
// before each half-open probe and reports p.Status in Snapshot.Shared. It
// returns the Member through which p reads and moves the breaker. A
// breaker has at most one party: Join while another has joined (and not
// left) is an error, and so is a nil p. To learn of transitions as they
// happen, a party also calls Observe.
func (b *Breaker) Join(p Party) (*Member, error) {
	if p == nil {
		return nil, fmt.Errorf("circuit: breaker %q: Join needs a party", b.cfg().Name)
	}
	m := &Member{b: b, p: p}
	if !b.party.CompareAndSwap(nil, m) {
		return nil, fmt.Errorf("circuit: breaker %q has a party already", b.cfg().Name)
	}
	return m, nil
}

// Leave ends m's part in the breaker's judgment: no probe gate, no shared
// status; the breaker judges alone. Calling it again does nothing.
func (m *Member) Leave() { m.b.party.CompareAndSwap(m, nil) }

// joined reports whether m is the breaker's party.
func (m *Member) joined() bool { return m.b.party.Load() == m }

// Look reads the breaker now, after applying any transition that time
// alone has made due (as State does).
func (m *Member) Look() Look {
	b := m.b
	now := b.clock.Now()
	b.mu.Lock()
	b.advanceLocked(now)
	w := word(b.word.Load())
	l := Look{
		State:     w.state(),
		Window:    b.cfg().window.Counts(now),
		Closes:    b.closes,
		LastClose: b.lastClose,
		gen:       w.gen(),
	}
	b.unlockAndEmit()
	return l
}

// Open opens the breaker because the fleet it belongs to opened, if it
// has not changed state since l was read: a closed breaker (not forced)
// turns open with reason fleet_open for its open duration, as if it had
// tripped, but nothing is counted as a local failure. A decision taken on
// what l showed can therefore never apply to a later state: a breaker that
// has closed since (its window cleared) is left alone. It reports whether
// it made the transition.
func (m *Member) Open(l Look) bool {
	return m.move(l, Open, ReasonFleetOpen, func(w word) bool { return w.state() == Closed })
}

// Close closes the breaker because the fleet's probes found the dependency
// healthy, if it has not changed state since l was read: an open or
// half-open breaker (not forced) turns closed with reason fleet_close, as
// if its own probes had closed it (window cleared, open duration reset,
// ramp-up if configured). It reports whether it made the transition.
func (m *Member) Close(l Look) bool {
	return m.move(l, Closed, ReasonFleetClose, func(w word) bool { return w.state() != Closed })
}

// move makes the transition to state to with reason, if m is joined, the
// breaker is in the generation of l, not forced, and from(word) holds.
func (m *Member) move(l Look, to State, reason Reason, from func(word) bool) bool {
	b := m.b
	now := b.clock.Now()
	b.mu.Lock()
	b.advanceLocked(now)
	w := word(b.word.Load())
	ok := m.joined() && w.gen() == l.gen && !w.mode().forced() && from(w)
	if ok {
		b.transitionLocked(now, to, w.mode(), reason)
	}
	b.unlockAndEmit()
	return ok
}

// probeAllowed reports whether the party, if any, lets a probe out.
func (b *Breaker) probeAllowed() bool {
	m := b.party.Load()
	return m == nil || m.p.MayProbe()
}

// sharedStatus returns the party's status, or "" with none.
func (b *Breaker) sharedStatus() string {
	if m := b.party.Load(); m != nil {
		return m.p.Status()
	}
	return ""
}
