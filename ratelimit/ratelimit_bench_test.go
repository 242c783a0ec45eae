package ratelimit

import (
	"context"
	"testing"
	"time"
)

// Run with: go test -run='^$' -bench=. -benchmem ./ratelimit/
//
// Each limiter admitting every call (a rate no benchmark reaches), on the
// system clock: the cost a limiter adds to a call it lets through.
func BenchmarkAdmit(b *testing.B) {
	ctx := context.Background()
	must := func(l Limiter, err error) Limiter {
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	for _, bc := range []struct {
		name string
		lim  Limiter
	}{
		{"TokenBucket", must(NewTokenBucket(TokenBucketConfig{Rate: 1e12, Burst: 1 << 30}))},
		{"SlidingWindow", must(NewSlidingWindow(SlidingWindowConfig{Limit: 1 << 62}))},
		{"Pacer", must(NewPacer(PacerConfig{Interval: time.Nanosecond, MaxWait: time.Hour}))},
		{"WarmUp", must(NewWarmUp(WarmUpConfig{Rate: 1e12, Burst: 1 << 30, Period: time.Second}))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.lim.Admit(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
