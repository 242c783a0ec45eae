package breaker

import "strconv"

// State is the breaker's position in its state machine.
type State uint8

// The three states. The zero value is Closed.
const (
	Closed   State = iota // calls flow; outcomes fill the window
	Open                  // calls are refused until the open duration has elapsed
	HalfOpen              // a few probe calls test the dependency
)

// String returns "closed", "open" or "half-open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Mode says whether the state machine decides admission. The zero value is
// Normal.
type Mode uint8

// The modes. ForcedOpen and ForcedClosed pin the effective state and stop the
// state machine; ObserveOnly runs the state machine and reports its
// transitions but admits every call.
const (
	Normal       Mode = iota // the state machine decides
	ForcedOpen               // refuse every call with ErrForcedOpen
	ForcedClosed             // admit every call
	ObserveOnly              // compute state and report transitions, never refuse
)

// String returns "normal", "forced-open", "forced-closed" or "observe-only".
func (m Mode) String() string {
	switch m {
	case Normal:
		return "normal"
	case ForcedOpen:
		return "forced-open"
	case ForcedClosed:
		return "forced-closed"
	case ObserveOnly:
		return "observe-only"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// Reason tells why a transition happened.
type Reason string

// The reasons a transition can have.
const (
	ReasonErrorRatio      Reason = "error_ratio"       // closed → open: failures and timeouts reached FailureRatio
	ReasonSlowRatio       Reason = "slow_ratio"        // closed → open: slow calls reached SlowCallRatio
	ReasonOpenElapsed     Reason = "open_elapsed"      // open → half-open: the open duration has elapsed
	ReasonProbeFailed     Reason = "probe_failed"      // half-open → open: a probe failed, timed out or was slow
	ReasonProbesSucceeded Reason = "probes_succeeded"  // half-open → closed: enough consecutive probes succeeded
	ReasonHalfOpenTimeout Reason = "half_open_timeout" // half-open → open: HalfOpenMaxWait passed without closing
	ReasonForced          Reason = "forced"            // SetMode changed the effective state
	ReasonHealthCheck     Reason = "health_check"      // open → half-open: Config.HealthCheck passed
	ReasonReset           Reason = "reset"             // any → closed: Reset restarted the breaker
)

// The breaker publishes its state, mode and generation in one atomic word so
// that Allow decides with a single load:
//
//	bits 0-1   State
//	bits 2-3   Mode
//	bit  4     ramp-up in progress (closed state only)
//	bits 32-63 generation: bumped by every change of state, and carried by
//	           each Permit so that a late Record can be recognised as stale
type word uint64

const (
	stateMask word = 0x3
	modeShift      = 2
	modeMask  word = 0x3 << modeShift
	rampBit   word = 1 << 4
	genShift       = 32

	// fastMask selects the bits that must all be zero for the hot path:
	// closed, normal mode, no ramp-up.
	fastMask = stateMask | modeMask | rampBit
)

func makeWord(s State, m Mode, ramp bool, gen uint32) word {
	w := word(s) | word(m)<<modeShift | word(gen)<<genShift
	if ramp {
		w |= rampBit
	}
	return w
}

func (w word) state() State { return State(w & stateMask) }
func (w word) mode() Mode   { return Mode((w & modeMask) >> modeShift) }
func (w word) ramp() bool   { return w&rampBit != 0 }
func (w word) gen() uint32  { return uint32(w >> genShift) }

// forced reports whether m pins the effective state.
func (m Mode) forced() bool { return m == ForcedOpen || m == ForcedClosed }
