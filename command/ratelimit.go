package command

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// Limiter is a rate limit: Admit returns nil to let a call go on, or an
// error to refuse it (the call is then RATE_LIMITED). The limiters of
// package ratelimit satisfy it. A limiter may wait (a pacer); if ctx ends
// while it waits, it returns ctx's error and the call is CANCELLED.
type Limiter interface {
	Admit(ctx context.Context) error
}

// NonWaiting is an optional interface of a Limiter or a KeyedLimiter:
// NeverWaits reports that Admit (AdmitKey) never waits, it admits or
// refuses at once, as ratelimit's TokenBucket, SlidingWindow and WarmUp do.
// When every limiter of a call never waits, Execute takes the call's first
// clock reading as the instant the limiters were done (a refusal's too),
// and reads the clock once less; otherwise (a Pacer, or a limiter that does
// not tell) it reads the clock again after them, so that a wait is not
// counted in Run's latency.
type NonWaiting interface {
	NeverWaits() bool
}

// ClockedLimiter is an optional interface of a Limiter that never waits
// and can take its caller's clock reading: Clock returns the limiter's
// clock, and AdmitAt is Admit at instant now, a reading of that clock. When
// a limiter's Clock is its group's (metrics.SameClock: by default both are
// metrics.SystemClock()), Execute calls AdmitAt with the reading it takes
// at the call's start anyway, and spares the limiter one of its own. The
// TokenBucket, SlidingWindow and WarmUp of package ratelimit implement it.
type ClockedLimiter interface {
	AdmitAt(now time.Duration) error
	Clock() metrics.Clock
}

// limitStage is one Limiter of a call, with its ClockedLimiter side when
// the limiter reads the group's clock.
type limitStage struct {
	Limiter
	at ClockedLimiter // nil: Admit reads the limiter's own clock, or waits
}

// stageOf returns the stage of limiter l (nil: none) in a group whose
// clock is clock.
func stageOf(l Limiter, clock metrics.Clock) limitStage {
	s := limitStage{Limiter: l}
	if at, ok := l.(ClockedLimiter); ok && metrics.SameClock(at.Clock(), clock) {
		s.at = at
	}
	return s
}

// admit asks the stage's limiter to admit a call that started at now, a
// reading of the group's clock.
func (s *limitStage) admit(ctx context.Context, now time.Duration) error {
	if s.at != nil {
		return s.at.AdmitAt(now)
	}
	return s.Admit(ctx)
}

// mayWait reports whether limiter l, a Limiter or a KeyedLimiter (nil:
// none), may wait in Admit: unless it says it never does.
func mayWait(l any) bool {
	if l == nil {
		return false
	}
	nw, ok := l.(NonWaiting)
	return !ok || !nw.NeverWaits()
}

// KeyedLimiter is a rate limit per key (per caller, per tenant), such as
// *ratelimit.PerKey: AdmitKey is Limiter.Admit for the call's key (WithKey).
type KeyedLimiter interface {
	AdmitKey(ctx context.Context, key string) error
}

// WithKey gives the call's key for the group's KeyedRateLimit (a caller, a
// tenant). A call without WithKey has the key "": all such calls share one
// quota, so a caller cannot escape its quota by leaving the key out.
func WithKey(key string) Option { return Option{key: key} }

// limit is the first stage of an attempt: it refuses a call whose
// WithTimeout is invalid (BAD_REQUEST: the caller's mistake) and has the
// call's rate limiters, if any, admit it (limited), a KeyedRateLimit with
// the key of opts, the call's options. It reports whether the attempt goes
// on; if not, k.r says why. A call with neither pays two tests, inlined.
func (k *call) limit(opts []Option) bool {
	return !k.cs.limited && k.timeout >= NoTimeout || k.limited(opts)
}

// limited is limit for a call with an invalid WithTimeout or with rate
// limiters. An invalid timeout (any negative one but NoTimeout) refuses
// the attempt at once. Otherwise limited asks the call's limiters, in order (the group's RateLimit, its
// KeyedRateLimit with the key of opts (WithKey), the command's
// RateLimit), to admit an attempt that started at t0, before the breakers
// see it, and reports whether they all did; if not, the attempt is
// RATE_LIMITED, or CANCELLED if ctx ended while a limiter waited, and it
// ends when the limiters were done. An attempt refused by a later limiter
// has used the quota of the earlier ones. It moves t0 to the instant the
// limiters were done (a limiter may wait, as a pacer does): Run's latency
// and the breakers' reckoning start there; the call's Latency still counts
// from its start. If no limiter of the call may wait (NonWaiting), t0 stays
// the attempt's start and the clock is not read. limit calls it only for a
// command with a limiter (limited).
func (k *call) limited(opts []Option) bool {
	if k.timeout < NoTimeout {
		k.r = result{event: metrics.BadRequest, err: fmt.Errorf("%w: WithTimeout(%v): negative (NoTimeout disables the timeout)", ErrInvalidConfig, k.timeout)}
		return false
	}
	cs, ctx := k.cs, k.ctx
	var err error
	if cs.groupLimit.Limiter != nil {
		err = cs.groupLimit.admit(ctx, k.t0)
	}
	if err == nil && cs.keyedLimit != nil {
		err = cs.keyedLimit.AdmitKey(ctx, keyOf(opts))
	}
	if err == nil && cs.limit.Limiter != nil {
		err = cs.limit.admit(ctx, k.t0)
	}
	if cs.limitWaits {
		k.t0 = k.g.clock.Now()
	}
	switch {
	case err == nil:
		return true
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		k.r = result{event: metrics.Cancelled, err: err}
	default:
		k.r = result{event: metrics.RateLimited, err: err}
	}
	k.now = k.t0
	return false
}

// keyOf returns the call's key (WithKey; the last one given), or "".
func keyOf(opts []Option) string {
	var key string
	for _, o := range opts {
		if o.key != "" {
			key = o.key
		}
	}
	return key
}
