package circuit

import "github.com/bulwark-go/bulwark/internal/breaker"

// The refusals the tests tell apart; the API has only ErrOpen, which each
// wraps.
var (
	errForcedOpen = breaker.ErrForcedOpen
	errProbeLimit = breaker.ErrProbeLimit
	errRampUp     = breaker.ErrRampUp
)
