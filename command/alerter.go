package command

import (
	"context"
	"log/slog"
	"time"
)

// alerter is a group's alerting, set in GroupConfig.Alerts; package alert
// implements it (alert.Watcher), reading the group's snapshots, and is its
// only implementation: the interface is not part of the API. The group
// calls Watch once, when NewGroup has created it, with a test that tells
// a quiet group (nothing in flight, every window empty, every breaker
// closed: an evaluation would find nothing to say) and the group's logger,
// and Unwatch from its Close; Status whenever a snapshot of the group is taken; and CallFailed
// from Execute for each attempt that ends in FAILURE or TIMEOUT (the calls
// that reached the dependency), with the caller's ctx (the one passed to
// Execute, to read a request ID from), its error and the group's clock
// reading, on the caller's goroutine: the one hook on the call path, so it
// must be quick, must not block and must not keep ctx. An alerter must be safe for concurrent
// use and comparable (a pointer): Reconfigure refuses to change it.
type alerter interface {
	Watch(g *Group, quiet func() bool, logger *slog.Logger)
	Unwatch(g *Group)
	CallFailed(ctx context.Context, g *Group, command string, at time.Duration, err error)
	// Status returns the alert tier that the breaker of command ("" for
	// the group's) has reached in its current outage, "" if none, and
	// whether the command's degraded alarm is raised.
	Status(g *Group, command string) (tier string, degradedAlarm bool)
}
