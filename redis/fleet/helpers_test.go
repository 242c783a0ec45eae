package fleet

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/internal/logtest"
	"github.com/bulwark-go/bulwark/metrics"
)

// TestMain checks for leaked goroutines. It also silences go-redis's own
// global logger, which prints every failed dial of the fault tests (the
// fleet logs its own degradation once).
func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	// go-redis's dial prober, started once per client after PoolSize
	// failed dials, sleeps 1 s between attempts and sees a closed client
	// only when it wakes: it outlives Close by up to a second.
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// testInterval is the sync interval of the integration tests.
const testInterval = 100 * time.Millisecond

// service returns a service name no other test (or run) shares.
func service(t testing.TB) string {
	return strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// instance is one process of a fleet: a registry with one semaphore group
// whose breaker is attached to a Fleet, and what its callers saw.
type instance struct {
	name  string
	f     *Fleet
	g     *command.Group
	log   *logtest.Buffer
	calls atomic.Int64  // Execute calls made
	ok    atomic.Int64  // Execute calls that returned no error
	maxNs atomic.Int64  // longest Execute call
	every time.Duration // between two calls of load; 0: 1 ms

	mu    sync.Mutex
	trans []circuit.Transition
	times []time.Time // when each transition was reported
}

// breakerConfig is the group breaker of the integration tests: 1 s window in
// 10 buckets, 20 calls before a verdict.
func breakerConfig(open time.Duration) circuit.Config {
	return circuit.Config{
		Window:            metrics.Window{Length: time.Second, Buckets: 10},
		MinRequests:       20,
		OpenDuration:      open,
		HalfOpenSuccesses: 3,
	}
}

// newInstance starts instance name of service on Redis at addr.
func newInstance(t testing.TB, addr, svc, name string, bc circuit.Config, tweak func(*Config)) *instance {
	t.Helper()
	in := &instance{name: name, log: new(logtest.Buffer)}
	bc.OnTransition = func(tr circuit.Transition) {
		in.mu.Lock()
		in.trans = append(in.trans, tr)
		in.times = append(in.times, time.Now())
		in.mu.Unlock()
	}
	reg := command.NewRegistry(command.RegistryConfig{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	var err error
	in.g, err = reg.NewGroup("dep", command.GroupConfig{Strategy: command.Semaphore, MaxConcurrent: 100,
		Breaker: bc, CommandBreaker: circuit.Config{Mode: circuit.ForcedClosed}})
	require.NoError(t, err)
	cfg := Config{Addr: addr, Service: svc, Instance: name, Interval: testInterval, Logger: slog.New(slog.NewTextHandler(in.log, nil))}
	if tweak != nil {
		tweak(&cfg)
	}
	in.f, err = New(cfg)
	require.NoError(t, err)
	require.NoError(t, in.f.Attach(in.g.Breaker(), "dep", ""))
	require.NoError(t, in.f.Start())
	t.Cleanup(func() { require.NoError(t, in.f.Close()) })
	return in
}

var errDown = errors.New("dependency down")

// call makes one call to a dependency that fails when fail is set; it
// reports whether the call reached the dependency.
func (in *instance) call(fail bool) bool {
	var reached bool
	run := func(context.Context) (int, error) {
		reached = true
		if fail {
			return 0, errDown
		}
		return 1, nil
	}
	t0 := time.Now()
	_, err := command.Execute(context.Background(), in.g, command.Func[int]("get", run, nil))
	d := time.Since(t0)
	for cur := in.maxNs.Load(); int64(d) > cur && !in.maxNs.CompareAndSwap(cur, int64(d)); cur = in.maxNs.Load() {
	}
	in.calls.Add(1)
	if err == nil {
		in.ok.Add(1)
	}
	return reached
}

func (in *instance) state() circuit.State { return in.g.Breaker().State() }

// member returns the fleet's member for the instance's breaker.
func (in *instance) member() *member { return in.f.members()[0] }

// opensAfter returns the transitions to open reported after t0.
func (in *instance) opensAfter(t0 time.Time) []circuit.Transition {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []circuit.Transition
	for i, tr := range in.trans {
		if tr.To == circuit.Open && in.times[i].After(t0) {
			out = append(out, tr)
		}
	}
	return out
}

// until calls in a loop (a call every ms, failing when fail is set) until
// cond holds, at most d.
func (in *instance) until(t testing.TB, d time.Duration, fail bool, cond func() bool, msg string) {
	t.Helper()
	eventually(t, d, func() bool {
		if cond() {
			return true
		}
		in.call(fail)
		return cond()
	}, in.name+": "+msg)
}

func (in *instance) reasons() []circuit.Reason {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []circuit.Reason
	for _, tr := range in.trans {
		out = append(out, tr.Reason)
	}
	return out
}

// conserved checks that every call made is one primary outcome in the
// group's cumulative counts, and that the callers' successes are its
// successes.
func (in *instance) conserved(t testing.TB) {
	t.Helper()
	c := in.g.Snapshot().Metrics.Cumulative
	var primary int64
	for _, e := range []metrics.Event{metrics.Success, metrics.Failure, metrics.Timeout, metrics.BadRequest,
		metrics.ShortCircuited, metrics.ThreadPoolRejected, metrics.SemaphoreRejected, metrics.Cancelled,
		metrics.QueueTimeout} {
		primary += c[e]
	}
	require.Equal(t, in.calls.Load(), primary, "instance %s: calls vs primary outcomes", in.name)
	require.Equal(t, in.ok.Load(), c[metrics.Success], "instance %s: successes", in.name)
}

// load calls in a loop (one call per ms, or per in.every when set) until
// stop is closed.
func (in *instance) load(stop <-chan struct{}, fail *atomic.Bool, wg *sync.WaitGroup) {
	every := in.every
	if every == 0 {
		every = time.Millisecond
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(every):
			}
			in.call(fail.Load())
		}
	}()
}

// eventually waits up to d for cond, polling every 5 ms, and returns how
// long it took.
func eventually(t testing.TB, d time.Duration, cond func() bool, msg string) time.Duration {
	t.Helper()
	t0 := time.Now()
	for !cond() {
		if time.Since(t0) > d {
			t.Fatalf("after %v: %s", d, msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(t0)
}

// client returns a plain client for a test to look at or spoil the keys.
func client(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true, Protocol: 2})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
