// Package throttle configures a group's client-side adaptive throttle
// (command.GroupConfig.Throttle), the rule of Google's SRE book ("Handling
// Overload"): over the group's metrics window (command.GroupConfig.Window) the
// group counts its requests and the dependency's accepts, and refuses a call
// locally, before the breakers see it, with probability
//
//	max(0, (requests − K·accepts) / (requests + 1))
//
// A dependency that accepts everything is never throttled (requests ≤
// K·accepts); one that accepts a share a of what it gets receives about K·a of
// the offered load once the throttle settles, so the load reaching an
// overloaded dependency stays near what it can take instead of piling on.
// Requests are the attempts the throttle refused (THROTTLED) and those that
// reached the dependency (SUCCESS, FAILURE, TIMEOUT, BAD_REQUEST); accepts are
// the SUCCESS and BAD_REQUEST ones (the dependency answered). Attempts refused
// by bulwark elsewhere (short-circuited, rejected, rate limited, queue
// timeouts) and cancelled ones are neither: they say nothing about the
// dependency. A throttled call is its own outcome, THROTTLED: it falls back, is
// never retried, its error matches command.ErrRefused, and neither breaker
// counts it: the throttle is for overload, the breaker for outage, and the two
// can run together.
//
// The zero value of Config is off. It changes live through
// command.Group.Reconfigure (the counts are kept).
package throttle

// Config is the throttle's configuration; see the package documentation for the
// rule it drives.
type Config struct {
	// K is the throttle's multiplier: how many requests per accept the group may
	// send before it throttles. In [1, ∞); the SRE book suggests 2. A lower K
	// throttles sooner and wastes less of the dependency's work on requests it
	// refuses; a higher one reacts later. Zero: off.
	K float64

	// Rand, if set, draws the throttle's decisions: a number in [0, 1) per call
	// while the throttle's probability is above zero. It is called concurrently,
	// so it must be safe for concurrent use. Tests and simulations inject a seeded
	// source to replay a run. Default: math/rand/v2's Float64.
	Rand func() float64
}

// Status tells a group's client-side throttle in a command.GroupSnapshot.
type Status struct {
	K           float64 // the config's K; 0: the throttle is off
	Requests    int64   // requests in the window: THROTTLED and the attempts that reached the dependency
	Accepts     int64   // the dependency's accepts in the window
	Probability float64 // the share of calls the throttle refuses now
}
