package fleet

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/internal/redistest"
)

// faultTimeout is the sync timeout of the fault tests: a call that waited
// on Redis would take at least this long.
const faultTimeout = time.Second

// maxCall bounds every call's latency in the fault tests: far below
// faultTimeout, far above a trivial call on a loaded machine.
const maxCall = 300 * time.Millisecond

// faultRig is a fleet of three under load (calls that succeed) on a private
// Redis server.
type faultRig struct {
	srv  *redistest.Server
	ins  []*instance
	stop chan struct{}
	wg   sync.WaitGroup
	fail atomic.Bool
}

func newFaultRig(t *testing.T) *faultRig {
	r := &faultRig{srv: redistest.Start(t), stop: make(chan struct{})}
	r.ins = fleetOf(t, r.srv.Addr, 3, breakerConfig(time.Minute), func(c *Config) { c.Timeout = faultTimeout })
	eventually(t, 5*time.Second, func() bool { return r.ins[0].f.Status().Syncs > 0 }, "no sync")
	for _, in := range r.ins {
		in.load(r.stop, &r.fail, &r.wg)
	}
	return r
}

// finish stops the load and checks that no call waited on Redis and that
// every call is counted once.
func (r *faultRig) finish(t *testing.T) {
	time.Sleep(3 * testInterval) // a few more syncs under load
	close(r.stop)
	r.wg.Wait()
	for _, in := range r.ins {
		require.Less(t, time.Duration(in.maxNs.Load()), maxCall, "instance %s: a call waited", in.name)
		require.Equal(t, in.calls.Load(), in.ok.Load(), "instance %s: a call failed", in.name)
		in.conserved(t)
		t.Logf("instance %s: %d calls, longest %v", in.name, in.calls.Load(), time.Duration(in.maxNs.Load()))
	}
}

func (r *faultRig) degraded(t *testing.T, want bool) {
	t.Helper()
	for _, in := range r.ins {
		eventually(t, DefaultDegradeAfter*faultTimeout+2*time.Second, func() bool { return in.f.Status().Degraded == want },
			in.name+": degraded should be "+map[bool]string{true: "true", false: "false"}[want])
	}
}

// A fleet whose breakers judge alone once Redis is gone: a local trip still
// works (no fleet to open).
func TestFleetRedisKilled(t *testing.T) {
	r := newFaultRig(t)
	r.srv.Kill()
	r.degraded(t, true)
	require.True(t, strings.HasPrefix(r.ins[0].f.Status().String(), "shared state: degraded ("))
	require.True(t, strings.HasPrefix(r.ins[0].g.Breaker().Snapshot().Shared, "shared state: degraded ("),
		"the dashboard sees it")
	time.Sleep(5 * testInterval) // syncs keep failing while calls go on
	r.finish(t)
	for _, in := range r.ins {
		require.Equal(t, 1, strings.Count(in.log.String(), "shared state degraded"), "logged once")
	}
	// Judging alone: instance a trips on its own failures, b stays closed.
	for r.ins[0].state() == circuit.Closed {
		r.ins[0].call(true)
	}
	time.Sleep(2 * testInterval)
	require.Equal(t, circuit.Closed, r.ins[1].state())
	// Half-open, a degraded instance probes alone (the gate is open).
	require.True(t, r.ins[0].member().MayProbe())
}

// SIGSTOP: connections stay open and nothing answers; every sync times
// out, no call waits, and the fleet resyncs on SIGCONT.
func TestFleetRedisPaused(t *testing.T) {
	r := newFaultRig(t)
	r.srv.Pause()
	r.degraded(t, true)
	time.Sleep(2 * faultTimeout) // several syncs time out while calls go on
	r.srv.Resume()
	r.degraded(t, false)
	r.finish(t)
	for _, in := range r.ins {
		require.Contains(t, in.log.String(), "shared state restored")
	}
}

// Restarted empty: the fleet repopulates the keys and shares windows
// again.
func TestFleetRedisRestarted(t *testing.T) {
	r := newFaultRig(t)
	r.srv.Restart()
	c := client(t, r.srv.Addr)
	base := r.ins[0].member().base
	eventually(t, 5*time.Second, func() bool { return c.HLen(context.Background(), base+":w").Val() == 3 }, "windows not republished")
	r.finish(t)
	r.sharesAgain(t)
}

// FLUSHALL: the same, without losing a connection.
func TestFleetRedisFlushed(t *testing.T) {
	r := newFaultRig(t)
	c := client(t, r.srv.Addr)
	require.NoError(t, c.FlushAll(context.Background()).Err())
	base := r.ins[0].member().base
	eventually(t, 5*time.Second, func() bool { return c.HLen(context.Background(), base+":w").Val() == 3 }, "windows not republished")
	r.finish(t)
	r.sharesAgain(t)
}

// sharesAgain checks that the fleet judges as one again: once the load's
// successes have left the windows, 12 failures on each of two instances
// (below MinRequests alone) open all three.
func (r *faultRig) sharesAgain(t *testing.T) {
	time.Sleep(breakerConfig(0).Window.Length + breakerConfig(0).Window.BucketWidth())
	for range 12 {
		r.ins[0].call(true)
		r.ins[1].call(true)
	}
	eventually(t, 3*time.Second, allIn(r.ins, circuit.Open), "fleet not open after resync")
}

// Garbage, skewed and absurd records are rejected and deleted, never
// counted; a key of the wrong type makes that breaker judge alone.
func TestFleetRejectsBadData(t *testing.T) {
	r := newFaultRig(t)
	c := client(t, r.srv.Addr)
	ctx := context.Background()
	base := r.ins[0].member().base
	now := time.Now().UnixMilli()
	skewed := window{At: now + 60_000, Failure: 1000} // a minute ahead
	require.NoError(t, c.HSet(ctx, base+":w", "garbage", "not a window", "skewed", skewed.String(),
		"absurd", "v2 0 1 0 99999999999999999 0 0").Err())
	require.NoError(t, c.Set(ctx, base+":s", "v2 notanepoch 0 1 x", 0).Err())
	rejected := func() (n uint64) {
		for _, in := range r.ins {
			n += in.f.Status().Rejected
		}
		return n
	}
	eventually(t, 5*time.Second, func() bool { return rejected() >= 4 }, "bad records not rejected")
	eventually(t, 5*time.Second, func() bool { return c.HLen(ctx, base+":w").Val() == 3 }, "bad records not deleted")
	logs := r.ins[0].log.String() + r.ins[1].log.String() + r.ins[2].log.String()
	require.Contains(t, logs, "rejected shared state")
	require.Contains(t, logs, "the state key held garbage")
	// A well-formed state that says the fleet is open opens nobody: only
	// the instances' own evidence (their windows) can.
	require.NoError(t, c.Set(ctx, base+":s", state{Epoch: 0, Open: true, Who: "x"}.String(), 0).Err())
	time.Sleep(3 * testInterval)
	for _, in := range r.ins {
		require.Equal(t, circuit.Closed, in.state(), "instance %s trusted bad data", in.name)
	}
	// Wrong type: the hash replaced by a list (after a clean sync, which
	// ends the episode of rejections so the next one is logged).
	require.NoError(t, c.Del(ctx, base+":s").Err())
	time.Sleep(3 * testInterval)
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error { // atomic: no sync in between
		p.Del(ctx, base+":w")
		p.RPush(ctx, base+":w", "x")
		return nil
	})
	require.NoError(t, err)
	time.Sleep(3 * testInterval)
	require.False(t, r.ins[0].f.Status().Degraded, "one bad key does not degrade the fleet")
	require.True(t, r.ins[0].member().MayProbe(), "judging alone")
	require.Contains(t, r.ins[0].log.String(), "WRONGTYPE")
	r.finish(t)
}

// An instance whose clock runs a minute ahead is not trusted by the others.
func TestFleetRejectsSkewedInstance(t *testing.T) {
	addr := redistest.Shared(t)
	svc := service(t)
	bc := breakerConfig(time.Minute)
	good := newInstance(t, addr, svc, "good", bc, nil)
	skewed := newInstance(t, addr, svc, "skewed", bc, func(c *Config) {
		c.Now = func() time.Time { return time.Now().Add(time.Minute) }
	})
	for skewed.state() == circuit.Closed {
		skewed.call(true)
	}
	eventually(t, 5*time.Second, func() bool { return good.f.Status().Rejected >= 2 }, "skewed records not rejected")
	require.Equal(t, circuit.Closed, good.state())
	require.Contains(t, good.log.String(), "in the future")
}
