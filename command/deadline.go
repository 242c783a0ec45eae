package command

import (
	"context"
	"fmt"
	"time"
)

// reserved returns the timeout of a call whose caller's context is ctx in
// a group with the deadline reserve reserve (positive): the group's
// timeout, or the time left before the caller's deadline less the reserve
// when that is shorter, so that the call times out inside the caller's
// budget and its fallback still answers. A budget already spent leaves 1
// ns: the call times out at once. Without a caller's deadline the timeout
// stays. Execute calls it for each attempt, so that a retry gets what is
// left.
func reserved(ctx context.Context, timeout, reserve time.Duration) time.Duration {
	last, ok := ctx.Deadline()
	if !ok {
		return timeout
	}
	left := max(time.Until(last)-reserve, time.Nanosecond)
	if timeout <= 0 || left < timeout {
		return left
	}
	return timeout
}

// validateReserve checks GroupConfig.DeadlineReserve.
func validateReserve(reserve time.Duration) error {
	if reserve < 0 {
		return fmt.Errorf("%w: DeadlineReserve %v must not be negative (0: off)", ErrInvalidConfig, reserve)
	}
	return nil
}
