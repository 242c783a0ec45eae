package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/internal/redistest"
)

// With three instances, A (139 of 140 calls failing) never tripped, while
// an unshared breaker tripped after 2.8 s: the fleet's successes diluted
// its failures (issue 22). A's own window trips it, at the very call an
// unshared breaker would trip on, whatever the others' windows say.
func TestFleetSickInstanceIsNotDilutedByHealthyOnes(t *testing.T) {
	ins := fleetOf(t, redistest.Shared(t), 3, breakerConfig(time.Minute), nil)
	a, b, c := ins[0], ins[1], ins[2]
	for range 100 {
		b.call(false)
		c.call(false)
	}
	time.Sleep(3 * testInterval) // their successes are in Redis, and back in a's sync
	for i := range breakerConfig(0).MinRequests {
		require.Equal(t, circuit.Closed, a.state(), "a tripped before its %d-th failure", i+1)
		a.call(true)
		b.call(false)
		c.call(false)
	}
	require.Equal(t, circuit.Open, a.state(), "a's own window holds MinRequests failures")
	require.Equal(t, []circuit.Reason{circuit.ReasonErrorRatio}, a.reasons())
	time.Sleep(3 * testInterval)
	require.Equal(t, circuit.Closed, b.state())
	require.Equal(t, circuit.Closed, c.state())
}

// With two instances, only A's path failing opened B too (fleet_open): one
// instance's bad network path opened the whole fleet (issue 22). A fleet
// open needs the evidence of two instances: a healthy B and an idle C stay
// closed.
func TestFleetOneInstancesBadPathOpensNoOther(t *testing.T) {
	ins := fleetOf(t, redistest.Shared(t), 3, breakerConfig(time.Minute), nil)
	a, b, c := ins[0], ins[1], ins[2]
	for a.state() == circuit.Closed {
		a.call(true)
		b.call(false)
	}
	for range 10 * 20 { // ten syncs, b still calling
		b.call(false)
		time.Sleep(testInterval / 20)
	}
	require.Equal(t, circuit.Closed, b.state(), "b opened: %v", b.reasons())
	require.Equal(t, circuit.Closed, c.state(), "c opened: %v", c.reasons())
	require.Empty(t, b.reasons())
	require.Empty(t, c.reasons())
}

// Two instances failing open the fleet; an instance whose own calls are
// healthy (MinRequests of them, below the ratios) keeps serving, while one
// with too few calls of its own to judge (d, none) follows the fleet.
func TestFleetHealthyInstanceKeepsServingUnderAFleetOpen(t *testing.T) {
	ins := fleetOf(t, redistest.Shared(t), 4, breakerConfig(time.Minute), nil)
	a, b, c, d := ins[0], ins[1], ins[2], ins[3]
	for range 25 {
		c.call(false) // c's path is fine: MinRequests calls and more, all good
	}
	for range 19 { // below MinRequests alone; 38 of the fleet's 63 calls failing
		a.call(true)
		b.call(true)
	}
	eventually(t, 2*time.Second, allIn([]*instance{a, b, d}, circuit.Open), "a, b and d not open")
	for _, in := range []*instance{a, b, d} {
		require.Equal(t, []circuit.Reason{ReasonOpen}, in.reasons(), in.name)
	}
	eventually(t, time.Second, func() bool {
		return strings.Contains(c.g.Breaker().Snapshot().Shared, "fleet open: 2 of 4 instances failing")
	}, "c's status does not tell the fleet is open: "+c.g.Breaker().Snapshot().Shared)
	for range 5 * 20 {
		c.call(false)
		time.Sleep(testInterval / 20)
	}
	require.Equal(t, circuit.Closed, c.state(), "c opened: %v", c.reasons())
}

// With Quorum.Follow, the healthy instance opens with the fleet too.
func TestFleetQuorumFollowOpensHealthyInstances(t *testing.T) {
	ins := fleetOf(t, redistest.Shared(t), 3, breakerConfig(time.Minute), func(c *Config) { c.Quorum.Follow = true })
	a, b, c := ins[0], ins[1], ins[2]
	for range 30 {
		c.call(false)
	}
	for range 15 {
		a.call(true)
		b.call(true)
	}
	eventually(t, 2*time.Second, allIn(ins, circuit.Open), "fleet not open")
	require.Equal(t, []circuit.Reason{ReasonOpen}, c.reasons())
}

// Two failing instances are not enough when the fleet's calls, summed,
// are mostly healthy: the quorum's ratio is over the whole fleet. c's
// successes are in Redis before a and b fail: a sync that read c's window
// while c was still calling would rightly open on the failures beside a
// few of c's successes (TestFleetTripsOnSharedWindow's case).
func TestFleetQuorumRatioIsOverTheWholeFleet(t *testing.T) {
	addr := redistest.Shared(t)
	ins := fleetOf(t, addr, 3, breakerConfig(time.Minute), nil)
	a, b, c := ins[0], ins[1], ins[2]
	for range 100 {
		c.call(false)
	}
	rc, base := client(t, addr), c.member().base
	eventually(t, 5*time.Second, func() bool {
		s, err := rc.HGet(context.Background(), base+":w", c.name).Result()
		f := strings.Fields(s) // "v2 epoch at success failure timeout slow"
		return err == nil && len(f) == 7 && f[3] == "100"
	}, "c's 100 successes never reached Redis")
	for range 8 {
		a.call(true) // 16 failures in all, below MinRequests alone
		b.call(true)
	}
	time.Sleep(5 * testInterval)
	for _, in := range ins {
		require.Equal(t, circuit.Closed, in.state(), "%s opened: %v", in.name, in.reasons())
	}
}
