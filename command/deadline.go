package command

import (
	"context"
	"fmt"
	"time"
)

// deadlined is timed for a call with a timeout or a deadline reserve: with
// a reserve, the caller's deadline less the reserve bounds the call, if ctx
// has a deadline.
func deadlined(ctx context.Context, timeout, reserve time.Duration) (context.Context, context.CancelFunc) {
	if reserve > 0 {
		if last, ok := ctx.Deadline(); ok {
			return budgeted(ctx, timeout, last.Add(-reserve))
		}
	}
	if timeout <= 0 {
		return ctx, nil
	}
	return context.WithTimeoutCause(ctx, timeout, errDeadline)
}

// budgeted returns ctx with our deadline (its cause errDeadline, so that
// the call ends as a TIMEOUT and falls back) at the earlier of now+timeout
// (when timeout > 0) and last, the caller's deadline less the group's
// reserve. It reads the wall clock once, as context.WithTimeout would.
func budgeted(ctx context.Context, timeout time.Duration, last time.Time) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		if t := time.Now().Add(timeout); t.Before(last) {
			last = t
		}
	}
	return context.WithDeadlineCause(ctx, last, errDeadline)
}

// validateReserve checks GroupConfig.DeadlineReserve.
func validateReserve(reserve time.Duration) error {
	if reserve < 0 {
		return fmt.Errorf("%w: DeadlineReserve %v must not be negative (0: off)", ErrInvalidConfig, reserve)
	}
	return nil
}
