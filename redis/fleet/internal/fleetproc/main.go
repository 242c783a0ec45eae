// Command fleetproc is one instance of a service, for the multi-process
// test of package fleet (procs_test.go): a registry with one semaphore
// group whose breaker is attached to a Fleet on the Redis at -redis, and
// -workers goroutines calling a simulated dependency through it.
//
// It reads commands on stdin, one per line, and acknowledges each on
// stdout once applied:
//
//	fail on|off   this instance's path to the dependency fails (9 calls in
//	              10 fail at once, 1 in 10 hangs until its timeout) or not
//	idle on|off   the workers stop calling, or call again
//	stop          stop calling, report and exit
//
// and writes one JSON object per line on stdout: {"ev":"ready"} once the
// fleet has synced, {"ev":"ack","cmd":…} per command, {"ev":"transition",…}
// per transition of the breaker, and {"ev":"final",…} with what the
// workers saw and the group counted.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
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

// event is one line of output.
type event struct {
	Ev     string `json:"ev"`
	T      int64  `json:"t"` // Unix ns
	Cmd    string `json:"cmd,omitempty"`
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
	Reason string `json:"reason,omitempty"`
	// final: calls the workers made and saw return, those that returned
	// no error, the group's primary outcomes (one per call), the longest
	// call, and the fleet's sync counts.
	Calls    int64  `json:"calls,omitempty"`
	Returned int64  `json:"returned,omitempty"`
	OK       int64  `json:"ok,omitempty"`
	Outcomes int64  `json:"outcomes,omitempty"`
	MaxNs    int64  `json:"maxNs,omitempty"`
	LagNs    int64  `json:"lagNs,omitempty"`
	Syncs    uint64 `json:"syncs,omitempty"`
	Failures uint64 `json:"failures,omitempty"`
}

// options are the flags.
type options struct {
	addr, service, name string
	interval, every     time.Duration
	timeout             time.Duration
	workers             int
}

func main() {
	var o options
	flag.StringVar(&o.addr, "redis", "", "Redis address, host:port")
	flag.StringVar(&o.service, "service", "", "the service the instances form")
	flag.StringVar(&o.name, "name", "", "this instance's name")
	flag.DurationVar(&o.interval, "interval", 100*time.Millisecond, "fleet sync interval")
	flag.DurationVar(&o.every, "every", 2*time.Millisecond, "pause between two calls of one worker")
	flag.DurationVar(&o.timeout, "timeout", 50*time.Millisecond, "call timeout")
	flag.IntVar(&o.workers, "workers", 4, "calling goroutines")
	flag.Parse()
	redis.SetLogger(quiet{})
	if err := run(o, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fleetproc:", err)
		os.Exit(1)
	}
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// out writes events, one JSON line each, from any goroutine.
type out struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (o *out) emit(e event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e.T == 0 {
		e.T = time.Now().UnixNano()
	}
	_ = o.enc.Encode(e)
}

var errDown = errors.New("dependency down")

// run is the instance: it returns when stdin says stop (or ends).
func run(o options, in io.Reader, w io.Writer) error {
	if o.addr == "" || o.service == "" || o.name == "" || o.workers < 1 {
		return errors.New("-redis, -service, -name and a positive -workers are required")
	}
	ev := &out{enc: json.NewEncoder(w)}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	reg := command.NewRegistry(command.RegistryConfig{Logger: logger})
	defer reg.Close(context.Background())
	bc := circuit.Config{
		Name:              "dep",
		Window:            metrics.Window{Length: time.Second, Buckets: 10},
		MinRequests:       10,
		OpenDuration:      500 * time.Millisecond,
		HalfOpenSuccesses: 3,
		Logger:            slog.New(slog.DiscardHandler),
		OnTransition: func(t circuit.Transition) {
			ev.emit(event{Ev: "transition", From: t.From.String(), To: t.To.String(), Reason: string(t.Reason)})
		},
	}
	g, err := reg.NewGroup("dep", command.GroupConfig{Strategy: command.Semaphore, MaxConcurrent: 50,
		Timeout: o.timeout, Breaker: bc, CommandBreaker: circuit.Config{Mode: circuit.ForcedClosed}})
	if err != nil {
		return err
	}
	f, err := fleet.New(fleet.Config{Addr: o.addr, Service: o.service, Instance: o.name, Interval: o.interval,
		Logger: logger})
	if err != nil {
		return err
	}
	if err := f.Attach(g.Breaker(), "dep", ""); err != nil {
		return err
	}
	if err := f.Start(); err != nil {
		return err
	}
	defer f.Close()
	for deadline := time.Now().Add(10 * time.Second); f.Status().Syncs == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("no sync with Redis at %s in 10 s: %s", o.addr, f.Status())
		}
	}
	ev.emit(event{Ev: "ready"})

	var failing, idle, stopped atomic.Bool
	var calls, returned, ok, maxNs, seq atomic.Int64
	dep := func(ctx context.Context) (int, error) {
		if !failing.Load() {
			return 1, nil
		}
		if seq.Add(1)%10 == 0 {
			<-ctx.Done()
			return 0, ctx.Err()
		}
		return 0, errDown
	}
	var wg sync.WaitGroup
	// lag is the longest a 10 ms sleep overran: how late this process's
	// timers fired, which bounds how late a caller can learn of its
	// deadline whatever bulwark does.
	var lag atomic.Int64
	wg.Go(func() {
		for !stopped.Load() {
			t0 := time.Now()
			time.Sleep(10 * time.Millisecond)
			if d := int64(time.Since(t0) - 10*time.Millisecond); d > lag.Load() {
				lag.Store(d)
			}
		}
	})
	for range o.workers {
		wg.Go(func() {
			for !stopped.Load() {
				if !idle.Load() {
					calls.Add(1)
					t0 := time.Now()
					_, err := command.Execute(context.Background(), g, command.Func[int]("get", dep, nil))
					d := int64(time.Since(t0))
					returned.Add(1)
					if err == nil {
						ok.Add(1)
					}
					for cur := maxNs.Load(); d > cur && !maxNs.CompareAndSwap(cur, d); cur = maxNs.Load() {
					}
				}
				time.Sleep(o.every)
			}
		})
	}

	sc := bufio.NewScanner(in)
	for sc.Scan() {
		cmd := strings.TrimSpace(sc.Text())
		switch cmd {
		case "fail on", "fail off":
			failing.Store(cmd == "fail on")
		case "idle on", "idle off":
			idle.Store(cmd == "idle on")
		case "stop":
		default:
			return fmt.Errorf("unknown command %q", cmd)
		}
		ev.emit(event{Ev: "ack", Cmd: cmd})
		if cmd == "stop" {
			break
		}
	}
	stopped.Store(true)
	wg.Wait()
	c := g.Snapshot().Metrics.Cumulative
	var outcomes int64
	for _, e := range []metrics.Event{metrics.Success, metrics.Failure, metrics.Timeout, metrics.BadRequest,
		metrics.ShortCircuited, metrics.ThreadPoolRejected, metrics.SemaphoreRejected, metrics.Cancelled,
		metrics.QueueTimeout} {
		outcomes += c[e]
	}
	s := f.Status()
	ev.emit(event{Ev: "final", Calls: calls.Load(), Returned: returned.Load(), OK: ok.Load(), Outcomes: outcomes,
		MaxNs: maxNs.Load(), LagNs: lag.Load(), Syncs: s.Syncs, Failures: s.Failures})
	return sc.Err()
}
