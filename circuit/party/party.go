// Package party lets an outside party, such as the fleet state of module
// redis (package fleet), take part in a circuit.Breaker's judgment: it
// implements Party, joins a breaker with Join, and acts through the Member
// it gets back, reading the breaker (Member.Look) and opening or closing it
// with reasons ReasonOpen and ReasonClose, each move tied to the Look it
// was decided on. A closed breaker's Allow and a successful Record ask
// nothing of it.
package party

import (
	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/internal/breaker"
	"github.com/bulwark-go/bulwark/metrics"
)

// Reasons of the transitions a Party makes through its Member.
const (
	ReasonOpen  = circuit.Reason(breaker.ReasonFleetOpen)  // closed → open: the party's fleet opened (Member.Open); no local failure counted
	ReasonClose = circuit.Reason(breaker.ReasonFleetClose) // open or half-open → closed: the fleet's probes closed it (Member.Close)
)

// Party is an outside party taking part in a breaker's judgment: it joins
// a breaker with Join and acts through the Member it gets back.
type Party interface {
	// MayProbe is asked in the half-open state before a probe slot is
	// taken: false refuses the call as when the probes are all in flight (in ObserveOnly
	// mode it is admitted, not as a probe), so that a fleet sends a few
	// probes, not one set per instance. It runs on the caller's
	// goroutine: it must be fast, must not block and must not call the
	// breaker. A half-open breaker whose party keeps answering false stays
	// half-open, so a party that cannot coordinate must answer true.
	MayProbe() bool
	// Status is what the breaker's Snapshot reports as Shared: how the party is doing
	// (for example "shared state: degraded (…)"), for dashboards. It must
	// be fast and must not call the breaker.
	Status() string
}

// Join makes p take part in b's judgment: from now on b asks p.MayProbe
// before each half-open probe and reports p.Status in its Snapshot's
// Shared. It
// returns the Member through which p reads and moves the breaker. A
// breaker has at most one party: Join while another has joined (and not
// left) is an error, and so is a nil p. To learn of transitions as they
// happen, a party also calls b.Observe.
func Join(b *circuit.Breaker, p Party) (*Member, error) {
	m, err := (*breaker.Breaker)(b).Join(p)
	return (*Member)(m), err
}

// Member is a party's handle on the breaker it joined. It is safe for
// concurrent use. After Leave, Open and Close do nothing and return false.
type Member breaker.Member

func (m *Member) engine() *breaker.Member { return (*breaker.Member)(m) }

// Look is a breaker read at one instant by Member.Look: what a party
// publishes of it, and the state its decisions refer to.
type Look struct {
	State  circuit.State  // effective state
	Window metrics.Counts // the breaker's own window: Success, Failure, Timeout and Slow counts
	// Closes counts the transitions to Closed since the breaker was
	// created, and LastClose is the reason of the last one ("" before
	// any): a party that compares two Looks learns that the breaker
	// closed in between, and why, even before the transition is reported.
	Closes    uint64
	LastClose circuit.Reason
	at        breaker.Look // the engine's reading, which Open and Close compare with the breaker
}

// Look reads the breaker now, after applying any transition that time
// alone has made due (as State does).
func (m *Member) Look() Look {
	l := m.engine().Look()
	return Look{State: circuit.State(l.State), Window: l.Window, Closes: l.Closes, LastClose: circuit.Reason(l.LastClose), at: l}
}

// Open opens the breaker because the fleet it belongs to opened, if it has
// not changed state since l was read: a closed breaker (not forced) turns
// open with reason ReasonOpen for its open duration, as if it had tripped,
// but nothing is counted as a local failure. A decision taken on what l
// showed can therefore never apply to a later state: a breaker that has
// closed since (its window cleared) is left alone. It reports whether it
// made the transition.
func (m *Member) Open(l Look) bool { return m.engine().Open(l.at) }

// Close closes the breaker because the fleet's probes found the dependency
// healthy, if it has not changed state since l was read: an open or
// half-open breaker (not forced) turns closed with reason ReasonClose, as
// if its own probes had closed it (window cleared, open duration reset,
// ramp-up if configured). It reports whether it made the transition.
func (m *Member) Close(l Look) bool { return m.engine().Close(l.at) }

// Leave ends m's part in the breaker's judgment: no probe gate, no shared
// status; the breaker judges alone. Calling it again does nothing.
func (m *Member) Leave() { m.engine().Leave() }
