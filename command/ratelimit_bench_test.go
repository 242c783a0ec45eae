package command

import (
	"testing"

	"github.com/bulwark-go/bulwark/ratelimit"
)

// BenchmarkExecuteSemaphoreTokenBucket is BenchmarkExecuteSemaphoreNoTimeout
// behind a token bucket that always has a token: the cost of the rate-limit
// stage on the semaphore path.
func BenchmarkExecuteSemaphoreTokenBucket(b *testing.B) {
	lim, err := ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 1e12, Burst: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	benchExecute(b, GroupConfig{Strategy: Semaphore, MaxConcurrent: 64, Timeout: NoTimeout, RateLimit: lim})
}
