package rules

import (
	"errors"
	"fmt"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/ratelimit"
)

// RateLimit declares a rate limiter of package ratelimit: exactly one of
// its fields is set.
type RateLimit struct {
	TokenBucket   *TokenBucket   `json:"tokenBucket"`
	SlidingWindow *SlidingWindow `json:"slidingWindow"`
}

// TokenBucket declares a ratelimit.TokenBucket (see
// ratelimit.TokenBucketConfig): rate tokens a second, burst of capacity
// (0: 1).
type TokenBucket struct {
	Rate  float64 `json:"rate"`
	Burst int     `json:"burst" rules:"nonzero"`
}

// SlidingWindow declares a ratelimit.SlidingWindow (see
// ratelimit.SlidingWindowConfig): at most limit calls per window (0: 1 s)
// counted in buckets sub-windows (0: 2).
type SlidingWindow struct {
	Limit   int      `json:"limit"`
	Window  Duration `json:"window" rules:"nonzero"`
	Buckets int      `json:"buckets" rules:"nonzero"`
}

// KeyedRateLimit declares a ratelimit.PerKey limiter: each key (WithKey)
// gets its own limiter as RateLimit declares it, and at most maxKeys keys
// (0: ratelimit.DefaultMaxKeys) are kept, the least recently used evicted.
type KeyedRateLimit struct {
	RateLimit
	MaxKeys int `json:"maxKeys" rules:"nonzero"`
}

// limitSpec is a limiter declaration as compared between documents: equal
// specs keep the running limiter.
type limitSpec struct {
	bucket        bool // a token bucket, else a sliding window
	tokenBucket   TokenBucket
	slidingWindow SlidingWindow
	maxKeys       int // a keyed limit's only
}

// spec returns r's limitSpec, or an error if r does not set exactly one
// kind.
func (r *RateLimit) spec() (limitSpec, error) {
	switch {
	case (r.TokenBucket == nil) == (r.SlidingWindow == nil):
		return limitSpec{}, errors.New(`set exactly one of "tokenBucket" and "slidingWindow"`)
	case r.TokenBucket != nil:
		return limitSpec{bucket: true, tokenBucket: *r.TokenBucket}, nil
	}
	return limitSpec{slidingWindow: *r.SlidingWindow}, nil
}

// build returns a new limiter as s declares it, on clock (nil: the system
// clock). The error names the kind's field.
func (s limitSpec) build(clock metrics.Clock) (ratelimit.Limiter, error) {
	if s.bucket {
		tb, err := ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: s.tokenBucket.Rate, Burst: s.tokenBucket.Burst, Clock: clock})
		if err != nil {
			return nil, fmt.Errorf("tokenBucket: %w", err)
		}
		return tb, nil
	}
	sw, err := ratelimit.NewSlidingWindow(ratelimit.SlidingWindowConfig{Limit: s.slidingWindow.Limit,
		Window: metrics.Window{Length: time.Duration(s.slidingWindow.Window), Buckets: s.slidingWindow.Buckets}, Clock: clock})
	if err != nil {
		return nil, fmt.Errorf("slidingWindow: %w", err)
	}
	return sw, nil
}

// limitSlot is where a limiter sits: a group's RateLimit (command ""), its
// KeyedRateLimit, or a command's RateLimit.
type limitSlot struct {
	group, command string
	keyed          bool
}

// builtLimit is a limiter built from a spec: a ratelimit.Limiter, or a
// *ratelimit.PerKey for a keyed slot.
type builtLimit struct {
	spec limitSpec
	lim  any
}

// limits builds the limiters of the document being applied: a slot whose
// spec is that of the document in force keeps its limiter (prev), any
// other gets a new one. next holds the document's limiters, to be kept
// once it is applied.
type limits struct {
	clock metrics.Clock
	prev  map[limitSlot]builtLimit
	next  map[limitSlot]builtLimit
}

// limiter returns the limiter r declares for slot.
func (l *limits) limiter(slot limitSlot, r *RateLimit) (ratelimit.Limiter, error) {
	s, err := r.spec()
	if err != nil {
		return nil, err
	}
	lim, err := l.get(slot, s, func() (any, error) { return s.build(l.clock) })
	if err != nil {
		return nil, err
	}
	return lim.(ratelimit.Limiter), nil
}

// keyed returns the per-key limiter r declares for slot.
func (l *limits) keyed(slot limitSlot, r *KeyedRateLimit) (ratelimit.KeyedLimiter, error) {
	s, err := r.spec()
	if err != nil {
		return nil, err
	}
	s.maxKeys = r.MaxKeys
	lim, err := l.get(slot, s, func() (any, error) {
		if _, err := s.build(l.clock); err != nil { // refuse a bad spec now, not on a key's first call
			return nil, err
		}
		pk, err := ratelimit.NewPerKey(ratelimit.PerKeyConfig{MaxKeys: s.maxKeys,
			New: func(string) (ratelimit.Limiter, error) { return s.build(l.clock) }})
		if err != nil {
			return nil, fmt.Errorf("maxKeys: %w", err)
		}
		return pk, nil
	})
	if err != nil {
		return nil, err
	}
	return lim.(*ratelimit.PerKey), nil
}

// get returns slot's limiter in force if its spec is s, else a new one
// from build, and records it for the document being applied.
func (l *limits) get(slot limitSlot, s limitSpec, build func() (any, error)) (any, error) {
	b, ok := l.prev[slot]
	if !ok || b.spec != s {
		lim, err := build()
		if err != nil {
			return nil, err
		}
		b = builtLimit{spec: s, lim: lim}
	}
	l.next[slot] = b
	return b.lim, nil
}
