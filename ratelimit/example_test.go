package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/ratelimit"
)

// A token bucket of 2 calls a second with a burst of 3, on a manual clock:
// the burst goes at once, then one call every 500 ms.
func ExampleTokenBucket() {
	var clock metrics.ManualClock
	lim, err := ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 2, Burst: 3, Clock: &clock})
	if err != nil {
		panic(err)
	}
	for i := range 5 {
		err := lim.Admit(context.Background())
		var le *ratelimit.LimitError
		if errors.As(err, &le) {
			fmt.Printf("call %d refused, retry after %v\n", i, le.RetryAfter)
			clock.Advance(le.RetryAfter)
			continue
		}
		fmt.Printf("call %d admitted at %v\n", i, clock.Now())
	}
	// Output:
	// call 0 admitted at 0s
	// call 1 admitted at 0s
	// call 2 admitted at 0s
	// call 3 refused, retry after 500ms
	// call 4 admitted at 500ms
}

// Per-caller quotas: each key gets its own bucket, and at most MaxKeys
// buckets are kept.
func ExamplePerKey() {
	var clock metrics.ManualClock
	perCaller, err := ratelimit.NewPerKey(ratelimit.PerKeyConfig{MaxKeys: 10_000,
		New: func(string) (ratelimit.Limiter, error) {
			return ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 1, Burst: 1, Clock: &clock})
		}})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	fmt.Println(perCaller.AdmitKey(ctx, "alice"))
	fmt.Println(perCaller.AdmitKey(ctx, "bob"))
	fmt.Println(perCaller.AdmitKey(ctx, "alice"))
	clock.Advance(time.Second)
	fmt.Println(perCaller.AdmitKey(ctx, "alice"))
	// Output:
	// <nil>
	// <nil>
	// ratelimit: limited (retry after 1s)
	// <nil>
}
