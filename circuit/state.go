package circuit

import "github.com/bulwark-go/bulwark/internal/breaker"

// State is the breaker's position in its state machine.
type State uint8

// The three states. The zero value is Closed.
const (
	Closed   State = iota // calls flow; outcomes fill the window
	Open                  // calls are refused until the open duration has elapsed
	HalfOpen              // a few probe calls test the dependency
)

// String returns "closed", "open" or "half-open".
func (s State) String() string { return breaker.State(s).String() }

// Mode says whether the state machine decides admission. The zero value is
// Normal.
type Mode uint8

// The modes. ForcedOpen and ForcedClosed pin the effective state and stop the
// state machine; ObserveOnly runs the state machine and reports its
// transitions but admits every call.
const (
	Normal       Mode = iota // the state machine decides
	ForcedOpen               // refuse every call (ErrOpen, "forced open")
	ForcedClosed             // admit every call
	ObserveOnly              // compute state and report transitions, never refuse
)

// String returns "normal", "forced-open", "forced-closed" or "observe-only".
func (m Mode) String() string { return breaker.Mode(m).String() }

// Reason tells why a transition happened.
type Reason string

// The reasons a transition can have. What acts on the breaker from
// outside adds its own: party.ReasonOpen and party.ReasonClose (package
// circuit/party), healthcheck.Reason (package circuit/healthcheck).
const (
	ReasonErrorRatio      Reason = "error_ratio"       // closed → open: failures and timeouts reached FailureRatio
	ReasonSlowRatio       Reason = "slow_ratio"        // closed → open: slow calls reached SlowCallRatio
	ReasonOpenElapsed     Reason = "open_elapsed"      // open → half-open: the open duration has elapsed
	ReasonProbeFailed     Reason = "probe_failed"      // half-open → open: HalfOpenFailures probes in a row failed, timed out or were slow
	ReasonProbesSucceeded Reason = "probes_succeeded"  // half-open → closed: HalfOpenSuccesses probes in a row succeeded
	ReasonHalfOpenTimeout Reason = "half_open_timeout" // half-open → open: HalfOpenMaxWait passed without a probe result
	ReasonForced          Reason = "forced"            // SetMode changed the effective state
	ReasonReset           Reason = "reset"             // any → closed: Reset restarted the breaker
)
