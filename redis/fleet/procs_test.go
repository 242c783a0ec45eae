package fleet

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/redistest"
)

// Bounds of the multi-process test, generous for a loaded 2-core machine.
// The instances (internal/fleetproc) run breakers with a 1 s window,
// MinRequests 10, a 500 ms open duration and 3 probes, calls with a 50 ms
// timeout, and sync every 100 ms.
const (
	procCallTimeout = 50 * time.Millisecond
	procRecovery    = 4 * time.Second        // healthy again → every calling instance closed
	procDetection   = 3 * time.Second        // a path fails → that instance open (window 1 s + margin)
	procCallSlack   = 250 * time.Millisecond // scheduling on a loaded machine, beyond a call's timeout
	// procGrace: a call (a probe, say) admitted before the dependency
	// healed may still fail, as late as its timeout plus the slack.
	procGrace = procCallTimeout + procCallSlack
)

// procEvent is a line fleetproc writes (the fields this test reads).
type procEvent struct {
	Ev       string `json:"ev"`
	T        int64  `json:"t"`
	Cmd      string `json:"cmd"`
	To       string `json:"to"`
	Reason   string `json:"reason"`
	Calls    int64  `json:"calls"`
	Returned int64  `json:"returned"`
	Outcomes int64  `json:"outcomes"`
	MaxNs    int64  `json:"maxNs"`
	LagNs    int64  `json:"lagNs"`
	Syncs    uint64 `json:"syncs"`
	Failures uint64 `json:"failures"`
}

// proc is one running fleetproc.
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // stdout read to its end

	mu     sync.Mutex
	events []procEvent
	acks   chan procEvent
}

func startProc(t *testing.T, bin, addr, svc, name string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan struct{}), acks: make(chan procEvent, 16)}
	p.cmd = exec.Command(bin, "-redis", addr, "-service", svc, "-name", name)
	var err error
	p.stdin, err = p.cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	p.cmd.Stderr = &procLog{t: t, name: name}
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done; _ = p.cmd.Wait() })
	ready := make(chan struct{})
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e procEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Errorf("%s: bad line %q: %v", name, sc.Text(), err)
				continue
			}
			p.mu.Lock()
			p.events = append(p.events, e)
			p.mu.Unlock()
			switch e.Ev {
			case "ready":
				close(ready)
			case "ack":
				p.acks <- e
			}
		}
	}()
	select {
	case <-ready:
	case <-p.done:
		t.Fatalf("%s exited before it was ready", name)
	case <-time.After(15 * time.Second):
		t.Fatalf("%s not ready in 15 s", name)
	}
	return p
}

// procLog passes a process's stderr to the test log.
type procLog struct {
	t    *testing.T
	name string
}

func (l *procLog) Write(b []byte) (int, error) {
	l.t.Logf("%s: %s", l.name, b)
	return len(b), nil
}

// send has the process apply cmd and returns when it did.
func (p *proc) send(t *testing.T, cmd string) time.Time {
	t.Helper()
	_, err := fmt.Fprintln(p.stdin, cmd)
	require.NoError(t, err)
	select {
	case e := <-p.acks:
		require.Equal(t, cmd, e.Cmd)
		return time.Unix(0, e.T)
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not acknowledge %q", p.name, cmd)
		return time.Time{}
	}
}

// transitions returns the transitions reported so far.
func (p *proc) transitions() []procEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []procEvent
	for _, e := range p.events {
		if e.Ev == "transition" {
			out = append(out, e)
		}
	}
	return out
}

// stateAt returns the breaker's state at t, from its transitions.
func (p *proc) stateAt(t time.Time) string {
	s := "closed"
	for _, e := range p.transitions() {
		if time.Unix(0, e.T).After(t) {
			break
		}
		s = e.To
	}
	return s
}

// opensIn returns the transitions to open in [from, to).
func (p *proc) opensIn(from, to time.Time) []procEvent {
	var out []procEvent
	for _, e := range p.transitions() {
		if at := time.Unix(0, e.T); e.To == "open" && !at.Before(from) && at.Before(to) {
			out = append(out, e)
		}
	}
	return out
}

// procRig is the fleet of processes, the Redis they share, and what the
// test asked of them when.
type procRig struct {
	t       *testing.T
	srv     *redistest.Server
	ps      []*proc
	healthy []span // per process: when it must not open
	checks  []func()
}

// span is a stretch of time.
type span struct {
	proc     int
	from, to time.Time
}

// all sends cmd to every process (or those listed) and returns the
// latest acknowledgement time.
func (r *procRig) all(cmd string, which ...int) time.Time {
	if which == nil {
		which = []int{0, 1, 2}
	}
	var last time.Time
	for _, i := range which {
		if at := r.ps[i].send(r.t, cmd); at.After(last) {
			last = at
		}
	}
	return last
}

// outage fails the dependency for every process (calls during(start)
// first, if set) for d, then heals it and queues the checks: every process opened during the outage, and every
// calling process is closed within procRecovery of the heal.
func (r *procRig) outage(name string, d time.Duration, during func(start time.Time)) {
	start := r.all("fail on")
	r.closeHealthy(start)
	if during != nil {
		during(start)
	}
	time.Sleep(d)
	healed := r.all("fail off")
	r.openHealthy(healed.Add(procGrace))
	r.checks = append(r.checks, func() {
		for _, p := range r.ps {
			require.NotEmpty(r.t, p.opensIn(start, healed), "%s: %s never opened during the outage", name, p.name)
			require.Equal(r.t, "closed", p.stateAt(healed.Add(procRecovery)),
				"%s: %s not closed %v after the dependency healed: recovery stalled", name, p.name, procRecovery)
		}
	})
}

// openHealthy starts a healthy span for every process at t.
func (r *procRig) openHealthy(t time.Time, which ...int) {
	if which == nil {
		which = []int{0, 1, 2}
	}
	for _, i := range which {
		r.healthy = append(r.healthy, span{proc: i, from: t})
	}
}

// closeHealthy ends the open healthy spans at t.
func (r *procRig) closeHealthy(t time.Time, which ...int) {
	if which == nil {
		which = []int{0, 1, 2}
	}
	for _, i := range which {
		for k := range r.healthy {
			if s := &r.healthy[k]; s.proc == i && s.to.IsZero() {
				s.to = t
			}
		}
	}
}

// Three instance processes and a private redis-server: repeated outages
// and recoveries, one instance's path failing alone, and Redis killed -9,
// paused with SIGSTOP for 5 s and restarted empty. It checks what issue 22
// found broken: no breaker opens while its dependency is healthy (no
// reopen at a close, no healthy instance opened by another's path), every
// recovery completes (no stalled probe lease), a sick instance trips
// within its own detection time, no call outlives its timeout, and every
// call ends in exactly one outcome.
func TestFleetProcessesUnderRedisFaults(t *testing.T) {
	srv := redistest.Start(t) // skips with the install command if redis-server is missing
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command builds the instance program: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "fleetproc")
	build := exec.Command(goBin, "build", "-o", bin, "./internal/fleetproc")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./internal/fleetproc: %v\n%s", err, b)
	}
	began := time.Now()
	svc := service(t)
	r := &procRig{t: t, srv: srv}
	for _, n := range []string{"a", "b", "c"} {
		r.ps = append(r.ps, startProc(t, bin, srv.Addr, svc, n))
	}
	r.openHealthy(time.Now())
	time.Sleep(time.Second)

	// Shared outages and recoveries; in the second, c goes idle once it
	// is open, so that an idle instance may hold the probe lease.
	r.outage("outage 1", 2*time.Second, nil)
	time.Sleep(procRecovery)
	r.outage("outage 2 (c idle)", 2*time.Second, func(start time.Time) {
		eventually(t, 5*time.Second, func() bool { return len(r.ps[2].opensIn(start, time.Now())) > 0 }, "c not open")
		r.all("idle on", 2)
	})
	time.Sleep(procRecovery)
	r.all("idle off", 2)
	r.outage("outage 3", 2*time.Second, nil)
	time.Sleep(procRecovery)

	// One instance's path fails: it trips within its own detection time;
	// the others, healthy, never open.
	sick := r.ps[0].send(t, "fail on")
	r.closeHealthy(sick, 0)
	time.Sleep(procDetection)
	healed := r.ps[0].send(t, "fail off")
	r.openHealthy(healed.Add(procGrace), 0)
	r.checks = append(r.checks, func() {
		opens := r.ps[0].opensIn(sick, healed)
		require.NotEmpty(t, opens, "a's path failed and a never tripped")
		require.Less(t, time.Unix(0, opens[0].T).Sub(sick), procDetection, "a tripped late")
		require.Equal(t, "closed", r.ps[0].stateAt(healed.Add(procRecovery)), "a did not recover")
	})
	time.Sleep(procRecovery)

	// Redis killed -9: every breaker judges alone through an outage, then
	// Redis comes back empty.
	srv.Kill()
	time.Sleep(time.Second)
	r.outage("outage with Redis killed", 2*time.Second, nil)
	time.Sleep(procRecovery)
	srv.Restart()
	time.Sleep(2 * time.Second)
	r.outage("outage after Redis restarted empty", 2*time.Second, nil)
	time.Sleep(procRecovery)

	// Redis paused (SIGSTOP) for 5 s, an outage and its recovery inside.
	srv.Pause()
	paused := time.Now()
	r.outage("outage with Redis paused", 2*time.Second, nil)
	time.Sleep(5*time.Second - time.Since(paused))
	srv.Resume()
	time.Sleep(procRecovery)
	r.outage("outage after Redis resumed", 2*time.Second, nil)
	time.Sleep(procRecovery)

	end := r.all("stop")
	r.closeHealthy(end)
	for _, p := range r.ps {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not exit", p.name)
		}
		require.NoError(t, p.cmd.Wait(), "%s exited", p.name)
	}
	t.Logf("scenario took %v", time.Since(began).Round(time.Millisecond))

	for _, check := range r.checks {
		check()
	}
	for _, s := range r.healthy {
		p := r.ps[s.proc]
		require.Empty(t, p.opensIn(s.from, s.to), "%s opened while its dependency was healthy (%v to %v): %v",
			p.name, s.from.Format("15:04:05.000"), s.to.Format("15:04:05.000"), p.transitions())
	}
	for _, p := range r.ps {
		var final procEvent
		for _, e := range p.events {
			if e.Ev == "final" {
				final = e
			}
		}
		require.Equal(t, "final", final.Ev, "%s reported nothing", p.name)
		require.Positive(t, final.Calls)
		require.Equal(t, final.Calls, final.Returned, "%s: a call never returned", p.name)
		require.Equal(t, final.Calls, final.Outcomes, "%s: calls vs the group's primary outcomes", p.name)
		// A caller learns of its deadline from a timer: on a machine so
		// loaded that the process's own timers fire late (LagNs: the
		// longest a 10 ms sleep overran), a call may be late by as much.
		lag := time.Duration(final.LagNs)
		require.Less(t, time.Duration(final.MaxNs), procCallTimeout+procCallSlack+lag,
			"%s: a call outlived its timeout by more than the process's timers were late (%v)", p.name, lag)
		t.Logf("%s: %d calls, longest %v, timers late by up to %v, %d transitions, %d syncs, %d failed", p.name, final.Calls,
			time.Duration(final.MaxNs).Round(time.Microsecond), lag.Round(time.Microsecond), len(p.transitions()), final.Syncs, final.Failures)
	}
}
