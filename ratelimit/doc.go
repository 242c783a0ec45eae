// Package ratelimit holds back a flood before it reaches a dependency: each
// limiter decides, per call, whether the call may go on now. It is usable
// alone (like circuit) and plugs into command groups as their first stage,
// before the breakers and the bulkhead.
//
// Every limiter has one method, Admit(ctx) error: nil admits the call; a
// refusal is a *LimitError that matches ErrLimited and says, in RetryAfter,
// when a call could be admitted. A refusal never counts against the
// dependency: it is bulwark's own decision, not the dependency's failure.
//
//	lim, err := ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 100, Burst: 20})
//	if err != nil { ... }
//	if err := lim.Admit(ctx); err != nil {
//		var le *ratelimit.LimitError
//		errors.As(err, &le) // le.RetryAfter: when to come back
//		return err
//	}
//
// The limiters:
//
//   - TokenBucket (lock-free, the generic cell rate algorithm): a steady
//     rate with bursts up to a capacity; over any span t from a full bucket
//     it admits at most Burst + Rate×t calls.
//   - SlidingWindow (on metrics.Rolling): at most Limit calls in any
//     Window.Length that starts on a sub-window boundary, which avoids a
//     fixed window's burst of twice the limit around its boundary.
//   - Pacer (a leaky bucket): calls spaced evenly, Interval apart; a call
//     waits for its slot, at most MaxWait, and gives up when its ctx ends.
//   - WarmUp: a token bucket whose rate rises from a cold fraction to the
//     full rate over a period, after start and after a long idle.
//   - PerKey: one limiter per key (per caller, per tenant), at most MaxKeys
//     of them kept, least recently used evicted, so key explosion cannot
//     eat memory.
//
// Every limiter reads a metrics.Clock (Config.Clock, default
// metrics.SystemClock), so tests run on a metrics.ManualClock and never
// sleep (a Pacer waits through PacerConfig.Sleep, which a test sets to move
// that clock). In a command group whose clock is theirs, the limiters that
// never wait (TokenBucket, SlidingWindow, WarmUp) decide at the reading the
// call takes at its start anyway, and Execute does not read the clock again
// after them: they cost a call no clock reading of their own.
// Configurations are validated: a bad value is an error wrapping
// ErrInvalidConfig that names the field and the value. All limiters are
// safe for concurrent use.
package ratelimit
