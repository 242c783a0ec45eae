// Package limiter is the engine of package ratelimit's limiters that never
// wait: TokenBucket, SlidingWindow and WarmUp are defined as this package's
// Bucket, Window and WarmUp, so a conversion between the two costs nothing.
// Package ratelimit holds their public API, configuration and validation;
// this package adds what users must not have: Clock, and AdmitAt, which
// decides at the instant its caller read instead of reading the clock,
// right only for a reading of the limiter's own clock taken for that call.
// Package command calls AdmitAt with the reading it takes at a call's
// start anyway, when the limiter's clock is its group's (see Clocked).
//
// The package holds no state of its own and starts nothing at init.
package limiter

import (
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// Clocked is a limiter that never waits and can take its caller's clock
// reading: Clock returns the clock it reads, and AdmitAt is its Admit at
// instant now, a reading of that clock taken for this call. Bucket, Window
// and WarmUp implement it.
type Clocked interface {
	AdmitAt(now time.Duration) error
	Clock() metrics.Clock
}

// Refuse returns the error of a refused call that could be admitted after
// retryAfter: package ratelimit hands its *LimitError constructor to each
// engine it makes.
type Refuse func(retryAfter time.Duration) error
