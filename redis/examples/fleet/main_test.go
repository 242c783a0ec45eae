package main

import (
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	// go-redis's dial prober, started once per client after PoolSize
	// failed dials, sleeps 1 s between attempts and sees a closed client
	// only when it wakes: it outlives Close by up to a second.
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// The example's claims, on a fleet of three: far fewer calls reach the
// failing dependency shared than alone, the fleet opens within about one
// interval, one instance's bad path opens no healthy instance, and killing
// Redis fails no call.
func TestFleetExample(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed: apt-get install redis-server")
	}
	o := options{sizes: []int{3}, every: 20 * time.Millisecond, interval: 100 * time.Millisecond}
	srv, err := startRedis()
	require.NoError(t, err)
	defer srv.stop()
	res, err := measure(io.Discard, srv, o)
	require.NoError(t, err)
	shared, alone := res.shared[3], res.alone[3]
	t.Logf("shared %+v, independent %+v, after kill %+v", shared, alone, res)
	require.Less(t, shared.reached, alone.reached)
	require.GreaterOrEqual(t, alone.reached, int64(3*20), "each breaker alone needs MinRequests")
	require.Less(t, shared.spread, o.interval+time.Second, "generous on a loaded machine; docs/fleet.md has the measured figures")
	require.True(t, res.pathTrip, "the instance whose path failed tripped on its own window")
	require.Zero(t, res.othersOpen, "healthy instances kept serving")
	require.Positive(t, res.calls)
	require.Zero(t, res.failed, "no call failed because Redis died")
	require.Less(t, res.longest, 300*time.Millisecond)
	require.True(t, res.degraded)
	require.True(t, res.trip, "each instance tripped on its own")
}
