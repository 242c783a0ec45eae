// Command fleet shows breakers judging a dependency as one fleet over Redis.
//
// It starts redis-server on a free loopback port (the binary must be
// installed: apt-get install redis-server), then runs instances (goroutines,
// each with its own registry, group and breaker, as separate processes
// would have) against a dependency that fails:
//
//  1. shared: the instances' breakers share state through Redis; counts how
//     many calls reached the dependency before every instance was open, and
//     the time from the first instance opening to the last;
//  2. independent: the same without Redis, each breaker alone;
//  3. one instance's path fails: it trips on its own window, and the
//     others, whose calls are healthy, keep serving (a fleet-wide open
//     needs the evidence of two instances);
//  4. Redis killed mid-run: calls go on (no call fails or waits because of
//     Redis), the fleet reports "shared state: degraded", and when the
//     dependency then fails each instance trips on its own.
//
// Run it with: cd redis && go run ./examples/fleet
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/redis/fleet"
)

func main() {
	sizes := flag.String("instances", "3,10", "fleet sizes to run, comma-separated")
	every := flag.Duration("every", 20*time.Millisecond, "time between two calls of one instance")
	interval := flag.Duration("interval", 100*time.Millisecond, "fleet sync interval")
	flag.Parse()
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "fleet: -instances: %q is not a positive number\n", s)
			os.Exit(2)
		}
		ns = append(ns, n)
	}
	redis.SetLogger(quiet{}) // the fleet logs Redis trouble once itself
	if err := run(os.Stdout, options{sizes: ns, every: *every, interval: *interval}); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// options says what run does.
type options struct {
	sizes    []int         // fleet sizes
	every    time.Duration // between two calls of one instance
	interval time.Duration // sync interval
}

// outage is what one run against the failing dependency measured.
type outage struct {
	reached int64         // calls that reached the dependency before all were open
	spread  time.Duration // first instance open to last
}

// result is what run measured, per fleet size.
type result struct {
	shared, alone map[int]outage
	// One instance's path failing: whether it tripped (on its own
	// window), and how many of the healthy others opened.
	pathTrip   bool
	othersOpen int
	// After Redis was killed: calls made, calls that failed, the longest
	// call, whether every instance said degraded, and whether each then
	// tripped on its own failures.
	calls, failed  int64
	longest        time.Duration
	degraded, trip bool
}

// run runs the three scenes and prints what they show.
func run(w io.Writer, o options) error {
	srv, err := startRedis()
	if err != nil {
		return err
	}
	defer srv.stop()
	res, err := measure(w, srv, o)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "\ncalls reaching the failing dependency before the whole fleet was open:")
	fmt.Fprintf(w, "  %-10s %10s %12s %22s\n", "instances", "shared", "independent", "first→last open (shared)")
	for _, n := range o.sizes {
		fmt.Fprintf(w, "  %-10d %10d %12d %22v\n", n, res.shared[n].reached, res.alone[n].reached,
			res.shared[n].spread.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "\none instance's path failing: it tripped alone: %v, healthy instances opened: %d\n",
		res.pathTrip, res.othersOpen)
	fmt.Fprintf(w, "\nRedis killed mid-run: %d calls, %d failed, longest call %v, all degraded: %v, then each tripped alone: %v\n",
		res.calls, res.failed, res.longest.Round(time.Microsecond), res.degraded, res.trip)
	return nil
}

// measure runs the scenes on srv.
func measure(w io.Writer, srv *redisServer, o options) (result, error) {
	res := result{shared: map[int]outage{}, alone: map[int]outage{}}
	for _, n := range o.sizes {
		for _, shared := range []bool{true, false} {
			f, err := newFleet(srv.addr, n, o.interval, shared)
			if err != nil {
				return res, err
			}
			out := f.outage(o.every)
			f.close()
			if shared {
				res.shared[n] = out
			} else {
				res.alone[n] = out
			}
			fmt.Fprintf(w, "%2d instances, shared=%-5v: %d calls reached the dependency, first→last open %v\n",
				n, shared, out.reached, out.spread.Round(time.Millisecond))
		}
	}
	f, err := newFleet(srv.addr, 3, o.interval, true)
	if err != nil {
		return res, err
	}
	f.badPath(o, &res)
	f.close()
	f, err = newFleet(srv.addr, 3, o.interval, true)
	if err != nil {
		return res, err
	}
	defer f.close()
	f.survive(srv, o, &res)
	return res, nil
}

// instance is one member of the fleet: its own registry and group.
type instance struct {
	reg     *command.Registry
	g       *command.Group
	f       *fleet.Fleet // nil when independent
	openAt  atomic.Int64 // ns since the scene began when it first opened; 0 while not
	failing atomic.Bool  // this instance's path to the dependency fails
}

// fleetRun is n instances and the dependency they call.
type fleetRun struct {
	ins     []*instance
	start   time.Time
	failing atomic.Bool
	reached atomic.Int64
}

func newFleet(addr string, n int, interval time.Duration, shared bool) (*fleetRun, error) {
	r := &fleetRun{start: time.Now()}
	svc := "example-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	quietLog := slog.New(slog.DiscardHandler)
	for i := range n {
		in := &instance{}
		in.reg = command.NewRegistry(command.RegistryConfig{Logger: quietLog})
		bc := circuit.Config{
			Window:       metrics.Window{Length: 10 * time.Second, Buckets: 10},
			MinRequests:  20,
			OpenDuration: time.Minute,
			OnTransition: func(t circuit.Transition) {
				if t.To == circuit.Open {
					in.openAt.CompareAndSwap(0, int64(time.Since(r.start)))
				}
			},
		}
		var err error
		in.g, err = in.reg.NewGroup("inventory", command.GroupConfig{Strategy: command.Semaphore, MaxConcurrent: 50,
			Breaker: bc, CommandBreaker: circuit.Config{Mode: circuit.ForcedClosed}})
		if err != nil {
			return nil, err
		}
		if shared {
			in.f, err = fleet.New(fleet.Config{Addr: addr, Service: svc, Instance: "i" + strconv.Itoa(i),
				Interval: interval, Logger: quietLog})
			if err == nil {
				err = in.f.Attach(in.g.Breaker(), "inventory", "")
			}
			if err == nil {
				err = in.f.Start()
			}
			if err != nil {
				return nil, err
			}
		}
		r.ins = append(r.ins, in)
	}
	return r, nil
}

func (r *fleetRun) close() {
	for _, in := range r.ins {
		if in.f != nil {
			_ = in.f.Close()
		}
		_ = in.reg.Close(context.Background())
	}
}

var errDown = errors.New("inventory down")

// call makes one call through in.
func (r *fleetRun) call(in *instance) (time.Duration, error) {
	t0 := time.Now()
	_, err := command.Execute(context.Background(), in.g, command.Func[int]("get", func(context.Context) (int, error) {
		r.reached.Add(1)
		if r.failing.Load() || in.failing.Load() {
			return 0, errDown
		}
		return 1, nil
	}, nil))
	return time.Since(t0), err
}

// load makes every instance call once per every (staggered) until stop
// closes; each call's latency and error go to seen.
func (r *fleetRun) load(every time.Duration, stop <-chan struct{}, seen func(time.Duration, error)) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i, in := range r.ins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(every * time.Duration(i) / time.Duration(len(r.ins)))
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				seen(r.call(in))
			}
		}()
	}
	return &wg
}

func (r *fleetRun) allOpen() bool {
	for _, in := range r.ins {
		if in.g.Breaker().State() != circuit.Open {
			return false
		}
	}
	return true
}

// outage fails the dependency and counts the calls that reach it until
// every instance is open.
func (r *fleetRun) outage(every time.Duration) outage {
	r.failing.Store(true)
	r.start = time.Now()
	stop := make(chan struct{})
	wg := r.load(every, stop, func(time.Duration, error) {})
	for !r.allOpen() {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	first, last := int64(0), int64(0)
	for i, in := range r.ins {
		at := in.openAt.Load()
		if i == 0 || at < first {
			first = at
		}
		last = max(last, at)
	}
	return outage{reached: r.reached.Load(), spread: time.Duration(last - first)}
}

// badPath runs a healthy dependency, then fails the path of the first
// instance only: it must trip on its own window, and the others, whose
// calls are healthy, must not open.
func (r *fleetRun) badPath(o options, res *result) {
	stop := make(chan struct{})
	wg := r.load(o.every, stop, func(time.Duration, error) {})
	time.Sleep(5 * o.interval)
	sick := r.ins[0]
	sick.failing.Store(true)
	deadline := time.Now().Add(10 * time.Second)
	for sick.g.Breaker().State() == circuit.Closed && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * o.interval) // the others go on calling, the fleet syncing
	close(stop)
	wg.Wait()
	ts := sick.g.Breaker().Snapshot().Transitions
	res.pathTrip = len(ts) > 0 && ts[0].Reason == circuit.ReasonErrorRatio
	for _, in := range r.ins[1:] {
		if in.openAt.Load() != 0 {
			res.othersOpen++
		}
	}
}

// survive runs a healthy dependency, kills Redis mid-run, then fails the
// dependency: every instance must go on answering and then trip alone.
func (r *fleetRun) survive(srv *redisServer, o options, res *result) {
	var calls, failed, longest atomic.Int64
	stop := make(chan struct{})
	wg := r.load(o.every, stop, func(d time.Duration, err error) {
		calls.Add(1)
		if err != nil {
			failed.Add(1)
		}
		for cur := longest.Load(); int64(d) > cur && !longest.CompareAndSwap(cur, int64(d)); cur = longest.Load() {
		}
	})
	time.Sleep(5 * o.interval)
	srv.stop()
	deadline := time.Now().Add(5 * time.Second)
	for !r.allDegraded() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(5 * o.interval) // calls go on with Redis gone
	close(stop)
	wg.Wait()
	res.calls, res.failed, res.longest = calls.Load(), failed.Load(), time.Duration(longest.Load())
	res.degraded = r.allDegraded()
	// The dependency fails now: with the fleet degraded, each instance
	// must trip on its own window.
	r.failing.Store(true)
	for _, in := range r.ins {
		for range 200 {
			if in.g.Breaker().State() == circuit.Open {
				break
			}
			_, _ = r.call(in)
		}
	}
	res.trip = true
	for _, in := range r.ins {
		ts := in.g.Breaker().Snapshot().Transitions
		res.trip = res.trip && len(ts) > 0 && ts[len(ts)-1].Reason == circuit.ReasonErrorRatio
	}
}

func (r *fleetRun) allDegraded() bool {
	for _, in := range r.ins {
		if !in.f.Status().Degraded {
			return false
		}
	}
	return true
}

// redisServer is the redis-server this program started.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
	once sync.Once
}

// startRedis starts redis-server on a free loopback port, without
// persistence, and waits until it answers.
func startRedis() (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server not found: install it (Debian/Ubuntu: apt-get install redis-server) and run again")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	s := &redisServer{addr: "127.0.0.1:" + port,
		cmd: exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1, DisableIdentity: true, Protocol: 2})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); c.Ping(context.Background()).Err() != nil; {
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server on %s never answered", s.addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s, nil
}

// stop kills the server (once) and waits for it.
func (s *redisServer) stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	})
}
