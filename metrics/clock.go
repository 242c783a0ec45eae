package metrics

import (
	"sync/atomic"
	"time"
)

// Clock tells monotonic time as a duration since an arbitrary fixed origin.
// Durations between two readings are exact; readings are not wall time.
// Implementations must be safe for concurrent use.
type Clock interface {
	Now() time.Duration
}

// SystemClock returns the Clock backed by the runtime's monotonic clock. Its
// origin is the moment the package was initialised, and every call returns
// the same Clock: readings taken by different users of SystemClock (a
// group, a rate limiter) are comparable, and two such clocks are equal
// (==), so a user can tell that a reading of one is valid for the other.
// It reads only the monotonic clock (time.Since of a fixed start);
// PERFORMANCE.md says what a reading costs.
func SystemClock() Clock { return system }

// system is the one SystemClock.
var system = &systemClock{origin: time.Now()}

type systemClock struct{ origin time.Time }

func (c *systemClock) Now() time.Duration { return time.Since(c.origin) }

// ManualClock is a Clock that moves only when told to, for tests and
// deterministic simulations. Its zero value reads 0 and is ready to use. It
// is safe for concurrent use.
type ManualClock struct {
	now atomic.Int64
}

// Now returns the clock's current reading.
func (c *ManualClock) Now() time.Duration { return time.Duration(c.now.Load()) }

// Advance moves the clock forward by d (backward if d is negative).
func (c *ManualClock) Advance(d time.Duration) { c.now.Add(int64(d)) }

// Set sets the clock's reading to t.
func (c *ManualClock) Set(t time.Duration) { c.now.Store(int64(t)) }
