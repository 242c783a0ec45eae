package fleet

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/internal/redistest"
)

// fakeWindows keeps the windows of instances that never follow a close in
// the hash of base: 15 failures each, counted in epoch 0, refreshed every
// 50 ms until the test ends, as two instances still open from the outage
// would publish them.
func fakeWindows(t *testing.T, addr, base string, names ...string) {
	c := client(t, addr)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			for _, n := range names {
				w := window{Epoch: 0, At: time.Now().UnixMilli(), Failure: 15}
				_ = c.HSet(context.Background(), base+":w", n, w.String()).Err()
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })
}

// The instance whose probes closed the breaker went closed → open in the
// same millisecond: a sync in flight at the close brought the windows of
// instances still open from the outage, and it judged on them (issue 22:
// about 3 in 10 shared recoveries). Here the sync is held in flight by a
// proxy (Redis has answered it, the fleet has not read the answer) while
// the probes close the breaker, then released; the old windows stay in
// Redis throughout.
func TestFleetNoReopenWhenASyncInFlightAtTheCloseCarriesOldWindows(t *testing.T) {
	addr := redistest.Shared(t)
	px := newProxy(t, addr, 0)
	a := newInstance(t, px.addr, service(t), "a", breakerConfig(300*time.Millisecond),
		func(c *Config) { c.Timeout = 10 * time.Second }) // a held sync must not time out
	eventually(t, 5*time.Second, func() bool { return a.f.Status().Syncs > 0 }, "no sync")
	fakeWindows(t, addr, a.member().base, "b", "c")
	eventually(t, 5*time.Second, func() bool { return a.state() == circuit.Open }, "the fleet did not open a")
	eventually(t, 5*time.Second, func() bool { return a.state() == circuit.HalfOpen }, "a not half-open")
	a.until(t, 5*time.Second, false, func() bool { return a.member().prober.Load() }, "a never got the probe lease")

	waiting := px.hold()
	select {
	case <-waiting:
	case <-time.After(5 * time.Second):
		t.Fatal("no sync in flight")
	}
	time.Sleep(20 * time.Millisecond) // the whole answer is in
	a.until(t, 5*time.Second, false, func() bool { return a.state() == circuit.Closed }, "the probes did not close a")
	closed := time.Now()
	px.release()
	time.Sleep(5 * testInterval) // the sync in flight, and a few after it, with the old windows still there
	require.Empty(t, a.opensAfter(closed), "reopened after the close: %v", a.reasons())
	require.Equal(t, circuit.Closed, a.state())
	a.conserved(t)
}

// With Redis a few milliseconds away the race is wide: 9 of 30 recoveries
// reopened within 26 ms of the close with 15 ms each way (issue 22). Three
// instances, each behind a proxy that delays every chunk 15 ms each way,
// go through outages and recoveries; once the dependency is healthy again
// no breaker may open.
func TestFleetNoReopenAtCloseWithRedisMillisecondsAway(t *testing.T) {
	addr := redistest.Shared(t)
	svc := service(t)
	bc := breakerConfig(300 * time.Millisecond)
	var ins []*instance
	for i, n := range []string{"a", "b", "c"} {
		px := newProxy(t, addr, 15*time.Millisecond)
		in := newInstance(t, px.addr, svc, n, bc, func(c *Config) { c.Timeout = time.Second })
		if i > 0 {
			in.every = 15 * time.Millisecond // b and c have sparse traffic: the fleet opens them
		}
		ins = append(ins, in)
	}
	var fail atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, in := range ins {
		in.load(stop, &fail, &wg)
	}
	defer func() { close(stop); wg.Wait() }()
	for cycle := range 8 {
		fail.Store(true)
		eventually(t, 5*time.Second, allIn(ins, circuit.Open), "cycle "+string(rune('0'+cycle))+": fleet not open")
		fail.Store(false)
		healthy := time.Now()
		eventually(t, 10*time.Second, allIn(ins, circuit.Closed), "cycle "+string(rune('0'+cycle))+": fleet not closed")
		time.Sleep(500 * time.Millisecond) // syncs in flight at the closes, and after
		// A probe admitted before the dependency healed may still fail: give
		// calls in flight at the change 50 ms.
		for _, in := range ins {
			require.Empty(t, in.opensAfter(healthy.Add(50*time.Millisecond)), "cycle %d, instance %s: %v", cycle, in.name, in.reasons())
		}
	}
}
