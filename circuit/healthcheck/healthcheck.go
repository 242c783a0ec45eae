// Package healthcheck finds a healed dependency while a circuit.Breaker is
// open, without spending a user's request on probing a dead one: Start
// attaches a Checker to a breaker, and while the breaker is open the
// checker runs Config.Check every Config.Interval; when a check passes the
// breaker turns half-open at once (reason Reason) instead of waiting out
// its open duration, and its own half-open trial decides as usual.
//
// The checker runs on one goroutine that exists only while the breaker is
// open (and not forced open), never two checks at once; Stop ends it. A
// closed breaker's Allow and Record ask nothing of it. The breaker's
// Snapshot reports the checker's progress in HealthCheck. With Manual as
// the interval nothing is scheduled: Checker.Check runs a check when
// called, on a virtual clock (a simulation or a test) or from an
// operator's hook.
//
// A command group's breakers are the group's own (command.Group.Breaker,
// command.Group.CommandBreaker): start a checker on the one whose
// dependency Check asks, and stop it when the group closes.
package healthcheck

import (
	"context"
	"fmt"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/internal/breaker"
)

// Manual is the Config.Interval that schedules no check: Checker.Check
// runs one when called.
const Manual time.Duration = -1

// defaultManualTimeout is Config.Timeout's default under Manual.
const defaultManualTimeout = time.Second

// Reason is the reason of the transition a passing check makes: open →
// half-open.
const Reason = circuit.Reason(breaker.ReasonHealthCheck)

// ErrSkipped is returned by Checker.Check when it runs no check: the
// breaker is not open (or is forced open), another check is running, or
// the checker was stopped. Any other error is a check that failed.
var ErrSkipped = breaker.ErrHealthCheckSkipped

// Config is a check run while a breaker is open.
type Config struct {
	// Check is called while the breaker is open (never concurrently with
	// itself, with a Timeout context): when it returns nil the breaker
	// turns half-open at once. It must honour its context: the next check
	// waits for it to return. A panic in it is a failed check, logged on
	// the breaker's Logger at Error level with its stack. Required.
	Check func(ctx context.Context) error

	// Interval is how often Check runs while the breaker is open: first
	// Interval after it opens (after Start, if it is open then), then
	// Interval after each failed check returns. It is real time (a timer),
	// whatever the breaker's Clock. Manual schedules nothing. Required.
	Interval time.Duration

	// Timeout bounds one check (its context's deadline). Default:
	// Interval, or 1 s with Manual.
	Timeout time.Duration
}

// Checker is a health checker started on a breaker. It is safe for
// concurrent use.
type Checker breaker.Checker

func (c *Checker) engine() *breaker.Checker { return (*breaker.Checker)(c) }

// Start attaches a checker running cfg to b and returns it. If b is open
// now (not forced open) its schedule starts then (the first check one
// Interval later), else at the next opening. An invalid cfg is an error wrapping
// circuit.ErrInvalidConfig that names the field, and so is a nil b; a
// breaker has at most one checker, so Start while another runs on b (not
// stopped) is an error too. Stop the checker when b is no longer used:
// while b is open its goroutine runs.
func Start(b *circuit.Breaker, cfg Config) (*Checker, error) {
	switch {
	case b == nil:
		return nil, invalid("Start needs a breaker")
	case cfg.Check == nil:
		return nil, invalid("Check must be set")
	case cfg.Interval == 0:
		return nil, invalid("Interval must be set (Manual: checks only on Checker.Check)")
	case cfg.Interval < 0 && cfg.Interval != Manual:
		return nil, invalid("Interval %v must not be negative (Manual schedules none)", cfg.Interval)
	case cfg.Timeout < 0:
		return nil, invalid("Timeout %v must not be negative", cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultManualTimeout
		if cfg.Interval > 0 {
			cfg.Timeout = cfg.Interval
		}
	}
	c, err := (*breaker.Breaker)(b).StartChecker(breaker.CheckSettings(cfg))
	return (*Checker)(c), err
}

// invalid returns a configuration error wrapping circuit.ErrInvalidConfig.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: healthcheck: "+format, append([]any{circuit.ErrInvalidConfig}, args...)...)
}

// Check runs Config.Check once now, with a Config.Timeout deadline under
// ctx, if the breaker is open (not forced), the checker is not stopped
// and no other check is running; when it passes and the breaker is still
// in the same open state, the breaker turns half-open at once (reason
// Reason) and Check returns nil. A check that fails (or panics) returns
// an error that wraps the check's error; one that is not run returns an
// error wrapping ErrSkipped. With Manual it is the only way checks run.
func (c *Checker) Check(ctx context.Context) error { return c.engine().Check(ctx) }

// Stop detaches the checker from its breaker: it cancels a check in
// progress (its context ends), waits for the scheduling goroutine to
// return, and schedules no more; Check returns ErrSkipped from then on,
// and Start may attach a new checker. The breaker keeps deciding
// admission; it just waits out its open duration again. Stop is
// idempotent. It waits for the check goroutine, so it must not be called
// from Config.Check or from a transition observer.
func (c *Checker) Stop() { c.engine().Stop() }
