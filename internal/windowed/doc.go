// Package windowed holds the two windowed types bulwark's own packages keep
// beside metrics.Rolling, each recording one thing only: a Tally, the counts
// of a chosen event set (a circuit breaker's health window, a sliding-window
// limit), and a Peak, a window's maximum (a group's peak of calls running at
// once). Their buckets rotate as a Rolling's do: the same code, package
// ring, rotates all three.
package windowed
