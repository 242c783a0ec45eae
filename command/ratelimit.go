package command

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/bulwark-go/bulwark/internal/limiter"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/ratelimit"
)

// limitStage is one rate limiter of a call, with its engine when the
// limiter never waits and reads the group's clock. Execute reads the clock
// again after the limiters, so that a wait is not counted in Run's latency,
// unless every limiter of the call is one of package ratelimit's that never
// wait (TokenBucket, SlidingWindow, WarmUp): those, when their clock is the
// group's, decide at the reading Execute takes at the call's start, and
// cost the call no clock reading of their own.
type limitStage struct {
	ratelimit.Limiter
	at limiter.Clocked // nil: Admit reads the limiter's own clock, or waits
}

// stageOf returns the stage of limiter l (nil: none) in a group whose
// clock is clock.
func stageOf(l ratelimit.Limiter, clock metrics.Clock) limitStage {
	s := limitStage{Limiter: l}
	if at := clocked(l); at != nil && sameClock(at.Clock(), clock) {
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

// clocked returns the engine of l when l is a limiter of package ratelimit
// that never waits (and so can take its caller's clock reading), else nil.
func clocked(l any) limiter.Clocked {
	switch l := l.(type) {
	case *ratelimit.TokenBucket:
		return (*limiter.Bucket)(l)
	case *ratelimit.SlidingWindow:
		return (*limiter.Window)(l)
	case *ratelimit.WarmUp:
		return (*limiter.WarmUp)(l)
	}
	return nil
}

// mayWait reports whether limiter l, a ratelimit.Limiter or KeyedLimiter (nil:
// none), may wait in Admit: unless it is one of package ratelimit's that
// never wait.
func mayWait(l any) bool {
	return l != nil && clocked(l) == nil
}

// sameClock reports whether a and b are one clock, so that a reading of one
// is a reading of the other: the same pointer, as metrics.SystemClock() is
// to itself and a *metrics.ManualClock to itself. A clock that is not a
// pointer is never the same as another, not even an equal copy (comparing
// such values could panic).
func sameClock(a, b metrics.Clock) bool {
	return a != nil && reflect.TypeOf(a).Kind() == reflect.Pointer && a == b
}

// WithKey gives the call's key for the group's KeyedRateLimit (a caller, a
// tenant). A call without WithKey has the key "": all such calls share one
// quota, so a caller cannot escape its quota by leaving the key out. It is
// only the rate limit's key: coalescing reads the command's own Key
// (Keyer), so two requests of one caller never share an answer.
func WithKey(key string) Option { return Option{key: key} }

// limit is the first stage of an attempt: it refuses a call whose
// WithTimeout is invalid (BAD_REQUEST: the caller's mistake), refuses a
// write in a read-only group (READ_ONLY), and has the call's rate
// limiters, if any, admit it (limited), a KeyedRateLimit with the key of
// opts, the call's options. It reports whether the attempt goes on; if
// not, k.r says why. A call with none of these pays two tests, inlined;
// whether the call is a write is asked only in a read-only group.
func (k *commandCall[T, C]) limit(opts []Option) bool {
	return !k.cs.limited && k.timeout >= NoTimeout || k.limited(opts)
}

// limited is limit for a call with an invalid WithTimeout, in a read-only
// group, to a warming instance, with rate limiters, a throttle, priority
// shedding, hedging, an adaptive limit or a registry's CallHook: it begins
// the attempt in the hook (before anything else of the attempt), asks
// whether the call is a write only in a read-only group (the question
// converts the command to an interface), hands the rest to passLimits, then
// to the throttle and priority shedding stages (which refuse before the
// breakers are asked, so a refused call never takes a probe's place), and
// tells the adaptive limit, if any, of the arrival. An attempt of a command
// that hedges then goes to hedge, which admits and makes it, and limited
// reports false: the attempt goes on at record.
func (k *commandCall[T, C]) limited(opts []Option) bool {
	if h := k.g.hook; h != nil {
		k.hookBegin(h)
	}
	ok := k.passLimits(opts, k.cs.readOnly && k.g.writes(any(k.cmd))) && k.throttle() && k.shed() && k.adaptArrive()
	if ok && k.cs.hedge != nil {
		return k.hedge()
	}
	return ok
}

// passLimits decides limited's call and reports whether the attempt goes
// on. An invalid timeout (any negative one but NoTimeout) refuses the
// attempt at once, and so does write, a write in a read-only group
// (READ_ONLY), before any limiter spends its quota on it. A call to an
// instance in its warm-up (InstanceWarmUp) is marked cold, for record.
// Otherwise passLimits asks the call's limiters, in order (the group's RateLimit, its
// KeyedRateLimit with the key of opts (WithKey), the command's
// RateLimit), to admit an attempt that started at t0, before the breakers
// see it, and reports whether they all did; if not, the attempt is
// RATE_LIMITED, or CANCELLED if ctx ended while a limiter waited, and it
// ends when the limiters were done. An attempt refused by a later limiter
// has used the quota of the earlier ones. It moves t0 to the instant the
// limiters were done (a limiter may wait, as a pacer does): Run's latency
// and the breakers' reckoning start there; the call's Latency still counts
// from its start. If no limiter of the call may wait (see limitStage), t0
// stays the attempt's start and the clock is not read.
func (k *call) passLimits(opts []Option, write bool) bool {
	if k.timeout < NoTimeout {
		k.r = result{event: metrics.BadRequest, err: fmt.Errorf("%w: WithTimeout(%v): negative (NoTimeout disables the timeout)", ErrInvalidConfig, k.timeout)}
		return false
	}
	if write {
		k.r = result{event: metrics.ReadOnly, err: refusedReadOnly}
		return false
	}
	cs, ctx := k.cs, k.ctx
	if d := cs.instanceWarmUp; d > 0 && k.g.instances.cold(k.g, instanceOf(opts), k.t0, d) {
		k.cold, k.judge = true, true
	}
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
