package fleet

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/internal/redistest"
)

func fleetOf(t *testing.T, addr string, n int, bc circuit.Config, tweak func(*Config)) []*instance {
	svc := service(t)
	out := make([]*instance, n)
	for i := range out {
		out[i] = newInstance(t, addr, svc, string(rune('a'+i)), bc, tweak)
	}
	return out
}

func allIn(ins []*instance, s circuit.State) func() bool {
	return func() bool {
		for _, in := range ins {
			if in.state() != s {
				return false
			}
		}
		return true
	}
}

// Two instances see the dependency fail (one trips on its own window, the
// other has seen a few failures); the third, which has made no call, opens
// within about one sync interval (plus a generous margin for a loaded
// machine), with reason fleet_open, and counts no failure of its own.
func TestFleetOpensWithinOneInterval(t *testing.T) {
	ins := fleetOf(t, redistest.Shared(t), 3, breakerConfig(time.Minute), nil)
	for range 3 {
		ins[1].call(true)
	}
	for ins[0].state() == circuit.Closed {
		ins[0].call(true)
	}
	took := eventually(t, testInterval+time.Second, allIn(ins, circuit.Open), "fleet not open")
	t.Logf("first open to last open: %v (interval %v)", took, testInterval)
	require.Equal(t, []circuit.Reason{circuit.ReasonErrorRatio}, ins[0].reasons())
	require.Equal(t, []circuit.Reason{ReasonOpen}, ins[2].reasons())
	require.Zero(t, ins[2].g.Breaker().Snapshot().Health.Requests, "no local failure")
	for _, in := range ins {
		in.conserved(t)
	}
}

// No instance alone sees MinRequests calls, but the fleet's windows do:
// every breaker opens on the quorum.
func TestFleetTripsOnSharedWindow(t *testing.T) {
	ins := fleetOf(t, redistest.Shared(t), 3, breakerConfig(time.Minute), nil)
	for _, in := range ins {
		for range 8 { // 24 calls in all, 8 each: below MinRequests 20 alone
			in.call(true)
		}
	}
	eventually(t, 3*testInterval+time.Second, allIn(ins, circuit.Open), "fleet not open")
	for _, in := range ins {
		require.Equal(t, []circuit.Reason{ReasonOpen}, in.reasons(), in.name)
		in.conserved(t)
	}
	eventually(t, time.Second, func() bool {
		return strings.Contains(ins[0].g.Breaker().Snapshot().Shared, "fleet open: 3 of 3 instances failing")
	}, "the status does not tell the fleet is open")
}

// Half-open, only the probe lease holder probes; its close closes the
// others (fleet_close), and old failures do not reopen anyone.
func TestFleetProbesOnce(t *testing.T) {
	open := 300 * time.Millisecond
	ins := fleetOf(t, redistest.Shared(t), 3, breakerConfig(open), nil)
	for range 12 {
		ins[0].call(true)
		ins[1].call(true)
	}
	eventually(t, 2*time.Second, allIn(ins, circuit.Open), "fleet not open")
	var reached atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, in := range ins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				if in.state() != circuit.Closed && in.call(false) {
					reached.Add(1)
				}
			}
		}()
	}
	eventually(t, 5*time.Second, allIn(ins, circuit.Closed), "fleet not closed")
	close(stop)
	wg.Wait()
	probers, followers := 0, 0
	for _, in := range ins {
		r := in.reasons()
		switch r[len(r)-1] {
		case circuit.ReasonProbesSucceeded:
			probers++
		case ReasonClose:
			followers++
		}
		in.conserved(t)
	}
	require.Equal(t, 1, probers, "one instance probes")
	require.Equal(t, 2, followers)
	// The prober's 3 probes, plus calls of instances that were closing
	// (a call admitted just as its breaker closed).
	require.LessOrEqual(t, reached.Load(), int64(3+2))
	time.Sleep(3 * testInterval) // a few syncs: the old windows must not reopen the fleet
	for _, in := range ins {
		in.call(true)
		require.Equal(t, circuit.Closed, in.state(), "instance %s", in.name)
	}
}

// Keys stay bounded: a dead instance's field is deleted, and every key has
// a TTL.
func TestFleetKeysBounded(t *testing.T) {
	addr := redistest.Shared(t)
	ins := fleetOf(t, addr, 3, breakerConfig(time.Minute), nil)
	c := client(t, addr)
	ctx := context.Background()
	base := ins[0].member().base
	eventually(t, 2*time.Second, func() bool { return c.HLen(ctx, base+":w").Val() == 3 }, "3 windows")
	require.NoError(t, ins[2].f.Close()) // instance c dies
	// Its field goes once it is older than the window (1 s + 2 intervals).
	eventually(t, 5*time.Second, func() bool { return c.HLen(ctx, base+":w").Val() == 2 }, "dead instance's window not deleted")
	ttl := c.PTTL(ctx, base+":w").Val()
	require.Greater(t, ttl, time.Duration(0))
	require.LessOrEqual(t, ttl, time.Second+2*testInterval)
	keys := c.Keys(ctx, DefaultPrefix+":"+key(ins[0].f.cfg.Service)+":*").Val()
	slices.Sort(keys)
	require.Equal(t, []string{base + ":s", base + ":w"}, keys, "the state and the windows; no lease while closed")
	require.Greater(t, c.PTTL(ctx, base+":s").Val(), time.Duration(0))
}
