package dashboard

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// scripted returns its error (nil: success) after no time.
type scripted struct {
	name string
	err  error
}

func (s scripted) Name() string                        { return s.name }
func (s scripted) Run(context.Context) (string, error) { return "ok", s.err }

// The stream reports what a live registry holds: known calls in, the same
// counts, health, settings and bulkhead figures out, with every key typed.
func TestStreamMatchesRegistry(t *testing.T) {
	clock := &metrics.ManualClock{} // the windows hold still while the test reads them
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	defer reg.Close(context.Background())
	users, err := reg.NewGroup("users", command.GroupConfig{MaxConcurrent: 6, QueueSize: 3, Timeout: 400 * time.Millisecond})
	require.NoError(t, err)
	cache, err := reg.NewGroup("cache", command.GroupConfig{Strategy: command.Semaphore, MaxConcurrent: 4, Timeout: command.NoTimeout})
	require.NoError(t, err)

	ctx := context.Background()
	boom := errors.New("boom")
	for range 7 {
		_, err := command.Execute(ctx, users, scripted{name: "GetUser"})
		require.NoError(t, err)
	}
	for range 3 {
		_, err := command.Execute(ctx, users, scripted{name: "GetUser", err: boom})
		require.Error(t, err)
	}
	for range 2 {
		_, err := command.Execute(ctx, users, scripted{name: "GetUser", err: command.BadRequest(boom)})
		require.Error(t, err)
	}
	for range 5 {
		_, err := command.Execute(ctx, cache, scripted{name: "Lookup"})
		require.NoError(t, err)
	}

	// A pool worker gives its slot back just after its caller has the
	// result: wait for it, so that the frame shows the idle pool.
	require.Eventually(t, func() bool { return users.Snapshot().Bulkhead.Active == 0 },
		5*time.Second, time.Millisecond)
	_, ts := newTestStream(t, reg, Config{})
	c := openStream(t, newTestClient(), ts.URL)
	defer c.Close()
	f, err := c.sse.frame()
	require.NoError(t, err)
	want := reg.Snapshot()

	for _, ev := range f.ofType(TypeHystrixCommand) {
		for k, kind := range hystrixCommandKeys {
			assert.True(t, kindOK(kind, ev[k]), "%v: key %s = %#v, want %s", ev["name"], k, ev[k], kind)
		}
	}
	for _, ev := range f.ofType(TypeHystrixThreadPool) {
		for k, kind := range hystrixThreadPoolKeys {
			assert.True(t, kindOK(kind, ev[k]), "%v: key %s = %#v, want %s", ev["name"], k, ev[k], kind)
		}
	}

	get := f.find(TypeHystrixCommand, "GetUser", "users")
	require.NotNil(t, get)
	assert.EqualValues(t, 7, num(get["rollingCountSuccess"]))
	assert.EqualValues(t, 3, num(get["rollingCountFailure"]))
	assert.EqualValues(t, 2, num(get["rollingCountBadRequests"]))
	assert.EqualValues(t, 5, num(get["rollingCountExceptionsThrown"]), "3 failures and 2 bad requests reached the caller")
	assert.EqualValues(t, 10, num(get["requestCount"]), "bad requests are not the dependency's doing")
	assert.EqualValues(t, 3, num(get["errorCount"]))
	assert.EqualValues(t, 30, num(get["errorPercentage"]))
	assert.Equal(t, false, get["isCircuitBreakerOpen"])
	assert.Equal(t, "THREAD", get["propertyValue_executionIsolationStrategy"])
	assert.EqualValues(t, 400, num(get["propertyValue_executionTimeoutInMilliseconds"]))
	assert.EqualValues(t, 6, num(get["propertyValue_executionIsolationSemaphoreMaxConcurrentRequests"]))
	assert.EqualValues(t, 20, num(get["propertyValue_circuitBreakerRequestVolumeThreshold"]))
	assert.EqualValues(t, 5000, num(get["propertyValue_circuitBreakerSleepWindowInMilliseconds"]))
	assert.EqualValues(t, 50, num(get["propertyValue_circuitBreakerErrorThresholdPercentage"]))
	assert.EqualValues(t, 10000, num(get["propertyValue_metricsRollingStatisticalWindowInMilliseconds"]))
	assert.EqualValues(t, 0, num(get["currentConcurrentExecutionCount"]))

	pool := f.find(TypeHystrixThreadPool, "users", "")
	require.NotNil(t, pool)
	wantUsers := want.Groups[1]
	require.Equal(t, "users", wantUsers.Name)
	assert.EqualValues(t, 6, num(pool["currentPoolSize"]))
	assert.EqualValues(t, 3, num(pool["propertyValue_queueSizeRejectionThreshold"]))
	assert.EqualValues(t, 0, num(pool["currentActiveCount"]))
	assert.EqualValues(t, wantUsers.Bulkhead.Completed, num(pool["currentCompletedTaskCount"]))
	assert.EqualValues(t, wantUsers.Bulkhead.LargestActive, num(pool["currentLargestPoolSize"]))
	assert.EqualValues(t, 12, num(pool["rollingCountThreadsExecuted"]), "7 + 3 + 2 calls ran in the pool")

	lookup := f.find(TypeHystrixCommand, "Lookup", "cache")
	require.NotNil(t, lookup)
	assert.Equal(t, "SEMAPHORE", lookup["propertyValue_executionIsolationStrategy"])
	assert.EqualValues(t, 5, num(lookup["rollingCountSuccess"]))
	assert.EqualValues(t, 0, num(lookup["propertyValue_executionTimeoutInMilliseconds"]), "no timeout")
	assert.EqualValues(t, 4, num(lookup["propertyValue_executionIsolationSemaphoreMaxConcurrentRequests"]))
	assert.Nil(t, f.find(TypeHystrixThreadPool, "cache", ""), "no thread-pool event for a semaphore group")

	native := f.find(TypeBulwarkCommand, "GetUser", "users")
	require.NotNil(t, native)
	assert.Equal(t, "closed", native["state"])
	assert.Equal(t, "normal", native["mode"])
	assert.InDelta(t, 0.3, flt(native["errorRatio"]), 1e-9)
	group := f.find(TypeBulwarkGroup, "cache", "")
	require.NotNil(t, group)
	assert.Equal(t, "SEMAPHORE", group["strategy"])
	assert.EqualValues(t, 4, num(group["capacity"]))
}
