// Package breaker is the engine of package circuit: the state machine of a
// circuit breaker, with what only bulwark's own packages may call.
// circuit.Breaker is defined as this package's Breaker (and circuit.Permit
// as its Permit), so a conversion between the two costs nothing:
//
//	eng := (*breaker.Breaker)(cb) // cb is a *circuit.Breaker
//
// circuit holds the public API, the Config users write, its validation and
// defaults; it hands the engine Settings, already valid. This package adds
// what users must not have:
//
//   - AllowAt and Permit.RecordAt take the caller's clock reading instead of
//     reading the clock, which is right only for a reading of the breaker's
//     own clock taken for that call (a stale one decides on the wrong time).
//     Package command calls them with the readings it takes at the start
//     and the end of every call anyway, on breakers it created on its own
//     clock: the call path reads the clock twice, not four times.
//   - Party, Member and Look let an outside party (the fleet of module
//     redis) gate probes, report a status and open or close the breaker.
//   - StartChecker and Checker run a health check while the breaker is
//     open (package circuit/healthcheck is their face), and
//     CheckReconfigure is Reconfigure's check alone, for package command.
//
// The package holds no state of its own and starts nothing at init: every
// breaker is a value its creator owns. Its behaviour is documented, and
// tested, through package circuit.
package breaker
