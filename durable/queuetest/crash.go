package queuetest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/durable"
	"github.com/bulwark-go/bulwark/metrics"
)

// The crash test runs the test binary again as child processes (Child,
// called from TestMain, sees childEnv) and kills them with SIGKILL at
// random points.
const (
	childEnv    = "BULWARK_QUEUETEST_CHILD" // the child's role (a Role), or "drain"
	childURL    = "BULWARK_QUEUETEST_URL"   // the test receiver
	childFrom   = "BULWARK_QUEUETEST_FROM"  // a writer's first key number
	childTo     = "BULWARK_QUEUETEST_TO"    // a writer's end key number (excluded)
	idemHeader  = "Bulwark-Key"             // not Idempotency-Key, which makes net/http resend a POST on a broken connection
	replayHdr   = "Bulwark-Replay"          // set on the deliveries of a replayer
	poisonEvery = 25                        // every 25th key is refused by the receiver
)

// Role is what a crash-test child process does.
type Role string

// Roles of crash-test children.
const (
	// Writer writes its keys through durable.Write (applied at once, or
	// deferred into the queue), then exits.
	Writer Role = "writer"
	// Replayer runs a durable.Replayer on the queue until it is killed.
	Replayer Role = "replayer"
	// Service does both at once, as a service process does: it writes its
	// keys and replays until it is killed.
	Service Role = "service"
)

// errRefused is the receiver's refusal of a poison key (422), which the
// children's replayers classify as durable.Refused: an attempt.
var errRefused = errors.New("receiver refused the write")

// Child runs a crash-test child when this process is one (the environment
// says so), with open opening the queue under test, and returns its exit
// status with ok true; in an ordinary test run it returns ok false. Call
// it first in TestMain:
//
//	if code, ok := queuetest.Child(open); ok {
//		os.Exit(code)
//	}
func Child(open func() (durable.Queue, error)) (code int, ok bool) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		return 0, false
	}
	if err := runChild(mode, open); err != nil {
		fmt.Fprintln(os.Stderr, "queuetest child:", err)
		return 1, true
	}
	return 0, true
}

func runChild(mode string, open func() (durable.Queue, error)) error {
	q, err := open()
	if err != nil {
		return err
	}
	defer q.Close()
	quiet := slog.New(slog.DiscardHandler)
	reg := command.NewRegistry(command.RegistryConfig{Logger: quiet})
	defer reg.Close(context.Background())
	breaker := circuit.Config{MinRequests: 5, OpenDuration: 50 * time.Millisecond}
	g, err := reg.NewGroup("orders", command.GroupConfig{Strategy: command.Semaphore, Timeout: 200 * time.Millisecond,
		Breaker: breaker, CommandBreaker: breaker})
	if err != nil {
		return err
	}
	url := os.Getenv(childURL)
	ctx := context.Background()
	switch Role(mode) {
	case Writer:
		return childWrite(g, q, url)
	case Replayer:
		return childReplay(ctx, g, q, url, quiet, false)
	case Service:
		done := make(chan error, 1)
		go func() { done <- childReplay(ctx, g, q, url, quiet, false) }()
		if err := childWrite(g, q, url); err != nil {
			return err
		}
		return <-done
	case "drain":
		return childReplay(ctx, g, q, url, quiet, true)
	}
	return fmt.Errorf("unknown mode %q", mode)
}

func keyOf(i int) string {
	if i%poisonEvery == poisonEvery-1 {
		return fmt.Sprint("poison-", i)
	}
	return fmt.Sprint("order-", i)
}

// post delivers e to the receiver at url; replay marks a replayer's
// delivery. A 422 is errRefused; any other answer but 200 an outage.
func post(ctx context.Context, url string, e durable.Entry, replay bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(e.Payload)))
	if err != nil {
		return err
	}
	req.Header.Set(idemHeader, e.Key)
	if replay {
		req.Header.Set(replayHdr, "1")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
		return nil
	case http.StatusUnprocessableEntity:
		return fmt.Errorf("%w: %s", errRefused, resp.Status)
	}
	return fmt.Errorf("receiver: %s", resp.Status)
}

// childWrite writes the keys childFrom..childTo-1, one every 2 ms (a
// service's requests), printing "accepted KEY applied" or "accepted KEY
// deferred" once a call answered so, then "done".
func childWrite(g *command.Group, q durable.Queue, url string) error {
	from, err1 := strconv.Atoi(os.Getenv(childFrom))
	to, err2 := strconv.Atoi(os.Getenv(childTo))
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	apply := func(ctx context.Context, e durable.Entry) error { return post(ctx, url, e, false) }
	for i := from; i < to; i++ {
		key := keyOf(i)
		_, info, err := command.ExecuteInfo(context.Background(), g, durable.Write{Command: "createOrder", Key: key, Payload: []byte(key), Apply: apply, Queue: q})
		if err != nil {
			return fmt.Errorf("write %s: %w", key, err)
		}
		how := "applied"
		if info.Events.Has(metrics.DegradedDeferred) {
			how = "deferred"
		}
		fmt.Fprintln(os.Stdout, "accepted", key, how)
		time.Sleep(2 * time.Millisecond)
	}
	fmt.Fprintln(os.Stdout, "done")
	return nil
}

// childReplay replays the queue into the receiver: until it is killed, or
// with drain until it is empty.
func childReplay(ctx context.Context, g *command.Group, q durable.Queue, url string, logger *slog.Logger, drain bool) error {
	classify := func(err error) durable.Verdict {
		if errors.Is(err, errRefused) {
			return durable.Refused
		}
		return durable.Outage
	}
	r, err := durable.NewReplayer(durable.ReplayerConfig{Queue: q, Group: g, Logger: logger, Classify: classify,
		Apply:   func(ctx context.Context, e durable.Entry) error { return post(ctx, url, e, true) },
		Backoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond, Poll: 2 * time.Millisecond})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for {
		select {
		case err := <-done:
			cancel()
			return err
		case <-time.After(5 * time.Millisecond):
		}
		if st, err := q.Stats(ctx); drain && err == nil && st.Depth == 0 {
			break
		}
	}
	cancel()
	<-done
	return nil
}

// child is a running child process, its stdout collected in out (line by
// line, safe to read once the child ended).
type child struct {
	cmd  *exec.Cmd
	out  []string
	done chan struct{}
}

func startChild(t *testing.T, mode string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, childEnv+"="+mode)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.out = append(c.out, sc.Text())
		}
	}()
	return c
}

// wait waits for the child to end and reports whether it exited by itself
// with status 0.
func (c *child) wait() bool {
	<-c.done
	return c.cmd.Wait() == nil
}

// kill kills the child (SIGKILL) and waits for it; it reports whether the
// kill cut the child off, and an error if the child had ended by itself
// with a failure.
func (c *child) kill() (cut bool, err error) {
	select {
	case <-c.done:
		if !c.wait() {
			return false, fmt.Errorf("child %v failed: %v", c.cmd.Env[len(c.cmd.Env)-1], c.cmd.ProcessState)
		}
		return false, nil
	default:
	}
	killed := c.cmd.Process.Signal(syscall.SIGKILL) == nil
	ok := c.wait()
	return killed && !ok, nil
}

// receiver is the HTTP dependency: it applies each key at most once,
// refuses poison keys (422), counts deliveries (and those of replayers
// apart), and goes through outages of three kinds: 503 answers, connections
// closed without an answer, and answers slower than the children's
// timeout.
type receiver struct {
	mu         sync.Mutex
	outage     int // 0: up; 1, 2, 3: the kinds above
	deliveries map[string]int
	replays    map[string]int
	applied    map[string]int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(idemHeader)
	rc.mu.Lock()
	outage := rc.outage
	rc.deliveries[key]++
	if r.Header.Get(replayHdr) != "" {
		rc.replays[key]++
	}
	rc.mu.Unlock()
	switch outage {
	case 1:
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	case 2:
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
		return
	case 3:
		select {
		case <-r.Context().Done():
		case <-time.After(300 * time.Millisecond):
		}
		http.Error(w, "too late", http.StatusGatewayTimeout)
		return
	}
	// Widen the window between apply and acknowledge.
	time.Sleep(time.Millisecond)
	if strings.HasPrefix(key, "poison-") {
		http.Error(w, "refused", http.StatusUnprocessableEntity)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.applied[key] == 0 { // honour the key: apply once
		rc.applied[key]++
	}
}

// setOutage sets the receiver's state: 0 up, else an outage's kind.
func (rc *receiver) setOutage(kind int) {
	rc.mu.Lock()
	rc.outage = kind
	rc.mu.Unlock()
}

// Crash is the kill -9 loop of a backend, under outages of the receiver.
// open opens the queue under test, in this process and in the children
// (which inherit the environment, so open may read its address from it).
// roles lists the child processes that run at once (for a Store, one
// Service: one process holds its file; for a shared backend, writers,
// replayers and services side by side); those that write share 400 keys.
//
// While the receiver goes up and down (outages of 50-400 ms: 503s, closed
// connections, answers past the timeout), a child is killed with SIGKILL
// every 30-250 ms, at whatever point it is, and started again (a writer
// resumes after the last key it reported accepted; while keys are left,
// half the kills go to a process that writes), until every key was
// written and at least 24 kills were made. Then the receiver stays up and
// one more child drains the queue. Every key a writer reported accepted
// must be applied exactly once at the idempotent receiver, except the
// poison keys it refuses: each of those must be dead-lettered after
// exactly MaxAttempts refusals, its dead letter counting at least the
// replays that reached the receiver. No valid write may be dead-lettered
// (the outages are far shorter than MaxAge) and none may stay pending. It
// logs the figures.
func Crash(t *testing.T, open func() (durable.Queue, error), roles ...Role) {
	start := time.Now()
	const n = 400
	rcv := &receiver{deliveries: map[string]int{}, replays: map[string]int{}, applied: map[string]int{}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()

	stopOutages := make(chan struct{})
	outagesDone := make(chan int)
	go func() {
		// pause waits 50-400 ms; false when the outages are to stop.
		pause := func() bool {
			select {
			case <-stopOutages:
				return false
			case <-time.After(time.Duration(50+rand.IntN(350)) * time.Millisecond):
				return true
			}
		}
		outages := 0
		for pause() {
			rcv.setOutage(1 + rand.IntN(3))
			outages++
			up := pause()
			rcv.setOutage(0)
			if !up {
				break
			}
		}
		outagesDone <- outages
	}()

	// Each role's slot: a writer's key range, its next key, its child.
	type slot struct {
		role     Role
		next, to int
		c        *child
	}
	var slots []*slot
	writers := 0
	for _, r := range roles {
		if r != Replayer {
			writers++
		}
	}
	require.Positive(t, writers, "a role that writes")
	from, lastWriter := 0, (*slot)(nil)
	for _, r := range roles {
		s := &slot{role: r}
		if r != Replayer {
			s.next, s.to = from, from+n/writers
			from, lastWriter = s.to, s
		}
		slots = append(slots, s)
	}
	lastWriter.to = n
	accepted, deferred := map[string]bool{}, map[string]bool{} // deferred: at least once
	launch := func(s *slot) {
		s.c = startChild(t, string(s.role), childURL+"="+srv.URL, childFrom+"="+strconv.Itoa(s.next), childTo+"="+strconv.Itoa(s.to))
	}
	// collect records what the ended child of s reported; it returns
	// whether s still has work.
	collect := func(s *slot) bool {
		for _, line := range s.c.out {
			if rest, ok := strings.CutPrefix(line, "accepted "); ok {
				key, how, _ := strings.Cut(rest, " ")
				accepted[key] = true
				if how == "deferred" {
					deferred[key] = true
				}
				s.next++
			}
			if line == "done" {
				s.next = s.to
			}
		}
		return s.role != Writer || s.next < s.to
	}
	for _, s := range slots {
		launch(s)
	}
	kills, killedWriting := 0, 0
	for round := 0; ; round++ {
		written := true
		for _, s := range slots {
			if s.role != Replayer && s.next < s.to {
				written = false
			}
		}
		if kills >= 24 && written {
			break
		}
		require.Less(t, round, 2000, "the writers never finished")
		time.Sleep(time.Duration(30+rand.IntN(220)) * time.Millisecond)
		s := slots[rand.IntN(len(slots))]
		if w := slices.IndexFunc(slots, func(s *slot) bool { return s.role != Replayer && s.next < s.to }); w >= 0 && rand.IntN(2) == 0 {
			s = slots[w] // half the kills, while there is writing left, cut a writer
		}
		if s.c == nil {
			continue
		}
		cut, err := s.c.kill()
		require.NoError(t, err)
		if cut {
			kills++
		}
		wasWriting := s.role != Replayer && s.next < s.to
		if collect(s) {
			if wasWriting && s.next < s.to {
				killedWriting++
			}
			launch(s)
		} else {
			s.c = nil
		}
	}
	for _, s := range slots {
		if s.c != nil {
			cut, err := s.c.kill()
			require.NoError(t, err)
			if cut {
				kills++
			}
			collect(s)
		}
	}
	close(stopOutages)
	outages := <-outagesDone

	last := startChild(t, "drain", childURL+"="+srv.URL)
	select {
	case <-last.done:
	case <-time.After(45 * time.Second):
		_, _ = last.kill()
		t.Fatal("the drain did not empty the queue within 45 s")
	}
	require.True(t, last.wait(), "the drain child failed")

	q, err := open()
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Depth, "nothing stays pending")
	dead, err := q.DeadLetters(ctx)
	require.NoError(t, err)
	deadByKey := map[string]durable.Entry{}
	for _, e := range dead {
		deadByKey[e.Key] = e
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	lost, deadValid, deadPoison, applied, duplicates := 0, 0, 0, 0, 0
	for key := range accepted {
		d, isDead := deadByKey[key]
		if strings.HasPrefix(key, "poison-") {
			if assert.True(t, isDead, "poison %s not dead-lettered", key) {
				deadPoison++
				assert.Equal(t, durable.ReasonAttempts, d.Reason, key)
				assert.Equal(t, durable.DefaultMaxAttempts, d.Attempts, "%s dead-lettered after %d refusals", key, d.Attempts)
				assert.GreaterOrEqual(t, d.Deliveries, rcv.replays[key], "%s: its dead letter counts fewer deliveries than reached the receiver", key)
			}
			continue
		}
		if isDead {
			deadValid++
			t.Errorf("valid write %s dead-lettered: %s (%s)", key, d.Reason, d.LastError)
			continue
		}
		switch rcv.applied[key] {
		case 1:
			applied++
		default:
			lost++
			t.Errorf("accepted write %s lost", key)
		}
		if rcv.deliveries[key] > 1 {
			duplicates++
		}
	}
	assert.Len(t, accepted, n, "every key was written")
	t.Logf("kill loop over roles %v: %d SIGKILLs (%d while writing), %d receiver outages; %d writes accepted (%d deferred), "+
		"%d applied once, %d lost, %d dead-lettered (%d poison after %d refusals, %d valid); %d keys delivered more than once, applied once; %v",
		roles, kills, killedWriting, outages, len(accepted), len(deferred), applied, lost, len(dead), deadPoison, durable.DefaultMaxAttempts,
		deadValid, duplicates, time.Since(start).Round(time.Millisecond))
}
