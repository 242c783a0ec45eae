package limiter

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// Bucket is the engine of ratelimit.TokenBucket: the generic cell rate
// algorithm on one atomic word, the instant the bucket would next be
// empty, moved by compare-and-swap.
type Bucket struct {
	tat      atomic.Int64 // theoretical arrival time: the bucket is empty at tat
	interval int64        // ns per token
	tau      int64        // (Burst-1) × interval: how far tat may run ahead of now
	clock    metrics.Clock
	refuse   Refuse
}

// NewBucket returns a full bucket that gains a token every interval ns and
// holds burst of them, on clock; its caller has checked that burst ×
// interval does not overflow.
func NewBucket(interval int64, burst int, clock metrics.Clock, refuse Refuse) *Bucket {
	b := &Bucket{interval: interval, tau: int64(burst-1) * interval, clock: clock, refuse: refuse}
	b.tat.Store(math.MinInt64 / 2) // long ago: full
	return b
}

// Clock returns the bucket's clock.
func (b *Bucket) Clock() metrics.Clock { return b.clock }

// Admit is AdmitAt at the clock's reading now.
func (b *Bucket) Admit() error { return b.AdmitAt(b.clock.Now()) }

// AdmitAt takes a token at instant at, or refuses with the time until the
// next token.
func (b *Bucket) AdmitAt(at time.Duration) error {
	now := int64(at)
	for {
		tat := b.tat.Load()
		t := max(tat, now)
		if ahead := t - now; ahead > b.tau {
			return b.refuse(time.Duration(ahead - b.tau))
		}
		if b.tat.CompareAndSwap(tat, t+b.interval) {
			return nil
		}
	}
}
