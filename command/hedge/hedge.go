// Package hedge configures hedged requests for a command
// (command.CommandConfig.Hedge): when an attempt of an Idempotent command has
// not answered after a delay, another attempt of the same call is started
// beside it, up to MaxHedges more; the first to succeed answers the caller,
// the others are cancelled and their late values go to the command's
// Discard. Hedges never start while a breaker is open or half-open, and they
// share the group's retry budget. docs/hedging.md tells what a hedged call
// does, how its load is counted and where it shows.
package hedge

import (
	"context"
	"time"
)

// Config turns on hedged requests for one command. Its zero value is off;
// command.NewGroup and Group.Reconfigure reject an invalid Config with an
// error naming the field and its value.
type Config struct {
	// MaxHedges is the most attempts a call starts beside its first: 0 is
	// off, at most 9. Hedge i starts i delays after the first attempt.
	MaxHedges int
	// Delay is how long an attempt may go unanswered before the next hedge
	// starts, when Percentile is 0. It must then be positive.
	Delay time.Duration
	// Percentile, if not 0, makes the delay that percentile of the
	// command's Run latency over its metrics window (one of the
	// percentiles the window keeps: 25, 50, 75, 90, 95, 99 or 99.5),
	// clamped to [MinDelay, MaxDelay], and MaxDelay while the window holds
	// no latency. It is read again once per window bucket.
	Percentile float64
	// MinDelay and MaxDelay clamp a Percentile's delay; MaxDelay must be
	// positive and not below MinDelay when Percentile is set.
	MinDelay, MaxDelay time.Duration
	// BudgetRatio caps the group's hedges and retries together (the retry
	// budget, retry.Config.BudgetRatio, which counts both) at this share of
	// its calls over the group's window, plus one a second: a hedge is
	// started only while the extra attempts stay under it. It must be in
	// (0, 1]. Default 0.05: at most about 5% more load.
	BudgetRatio float64
	// Sleep waits d before a hedge, or until ctx ends (the call was
	// answered first). Default: a timer. Tests and simulations set it to
	// move a metrics.ManualClock instead.
	Sleep func(ctx context.Context, d time.Duration) error
}
