package browsertest

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/ratelimit"
)

// TestBrowserRateLimitedCounter: a command behind a token bucket shows its
// RATE_LIMITED calls in the tile's "Rate limited" counter (and, as the
// Hystrix event counts them, among the rejections), apart from the calls
// that went through. The registry and the bucket run on a manual clock
// that never moves, so the window keeps every call.
func TestBrowserRateLimitedCounter(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped in -short mode")
	}
	ctx := startChromium(t)
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { assert.NoError(t, reg.Close(context.Background())) })
	const burst, calls = 3, 10
	bucket, err := ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 1, Burst: burst, Clock: clock})
	require.NoError(t, err)
	g, err := reg.NewGroup("search", command.GroupConfig{Strategy: command.Semaphore, RateLimit: bucket})
	require.NoError(t, err)
	query := command.Func("Query", func(context.Context) (int, error) { return 1, nil },
		func(context.Context, error) (int, error) { return 0, nil })
	limited := 0
	for range calls {
		_, info, err := command.ExecuteInfo(context.Background(), g, query)
		require.NoError(t, err)
		if info.Event == metrics.RateLimited {
			limited++
		}
	}
	require.Equal(t, calls-burst, limited, "the bucket admits its burst, then refuses")

	tileShows(t, ctx, reg, "Query", "rate-limited", "Rate limited",
		map[string]int{"rate-limited": calls - burst, "success": burst, "rejected": calls - burst})
}
