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
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/durable"
)

// The crash test runs the test binary again as child processes (Child,
// called from TestMain, sees childEnv) and kills them with SIGKILL at
// random points.
const (
	childEnv    = "BULWARK_QUEUETEST_CHILD" // the child's mode: enqueue or replay
	childURL    = "BULWARK_QUEUETEST_URL"   // the test receiver
	childN      = "BULWARK_QUEUETEST_N"     // how many writes to enqueue
	idemHeader  = "Idempotency-Key"
	poisonEvery = 25 // every 25th key is refused by the receiver for good
)

// errDown is the backend's answer while the children accept writes.
var errDown = errors.New("backend down")

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
	g, err := reg.NewGroup("orders", command.GroupConfig{Strategy: command.Semaphore, Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	switch mode {
	case "enqueue":
		return childEnqueue(g, q)
	case "replay":
		return childReplay(g, q, quiet)
	}
	return fmt.Errorf("unknown mode %q", mode)
}

func keyOf(i int) string {
	if i%poisonEvery == poisonEvery-1 {
		return fmt.Sprint("poison-", i)
	}
	return fmt.Sprint("order-", i)
}

// childEnqueue writes keys 0..N-1 while the backend is down: each is
// deferred, and "accepted KEY" is printed once the call answered so.
func childEnqueue(g *command.Group, q durable.Queue) error {
	var n int
	if _, err := fmt.Sscan(os.Getenv(childN), &n); err != nil {
		return err
	}
	down := func(context.Context, durable.Entry) error { return errDown }
	for i := range n {
		_, info, err := command.ExecuteInfo(context.Background(), g, durable.Write{Command: "createOrder", Key: keyOf(i), Payload: []byte(keyOf(i)), Apply: down, Queue: q})
		if err != nil {
			return err
		}
		if info.Deferred {
			fmt.Fprintln(os.Stdout, "accepted", keyOf(i))
		}
	}
	return nil
}

// childReplay replays the queue into the receiver until it is empty.
func childReplay(g *command.Group, q durable.Queue, logger *slog.Logger) error {
	url := os.Getenv(childURL)
	apply := func(ctx context.Context, e durable.Entry) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(e.Payload)))
		if err != nil {
			return err
		}
		req.Header.Set(idemHeader, e.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("receiver: %s", resp.Status)
		}
		return nil
	}
	r, err := durable.NewReplayer(durable.ReplayerConfig{Queue: q, Group: g, Apply: apply, Logger: logger,
		Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, Poll: 2 * time.Millisecond})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for {
		time.Sleep(5 * time.Millisecond)
		if st, err := q.Stats(ctx); err == nil && st.Depth == 0 {
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

// killAfter kills the child after d unless it ended first; it reports
// whether the kill cut the child off.
func (c *child) killAfter(d time.Duration) bool {
	select {
	case <-c.done:
		return false
	case <-time.After(d):
	}
	killed := c.cmd.Process.Signal(syscall.SIGKILL) == nil
	ok := c.wait()
	return killed && !ok
}

// idempotentReceiver is the HTTP dependency: it applies each key at most
// once, refuses poison keys for good, and counts deliveries.
type idempotentReceiver struct {
	mu         sync.Mutex
	deliveries map[string]int
	applied    map[string]int
}

func (rc *idempotentReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(idemHeader)
	// Widen the window between apply and acknowledge, and make a drain of
	// the queue outlast 20 replay children killed 30-150 ms after their
	// start: at 1 ms a fast disk let a child drain it before the 20th kill.
	time.Sleep(5 * time.Millisecond)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.deliveries[key]++
	if strings.HasPrefix(key, "poison-") {
		http.Error(w, "refused", http.StatusInternalServerError)
		return
	}
	if rc.applied[key] == 0 { // honour the key: apply once
		rc.applied[key]++
	}
}

// Crash is the crash test of a backend; open opens the queue under test,
// in this process and in the children (which inherit the environment, so
// open may read its address from it). Child processes accept 400 writes
// while the backend is down and are killed at random points; replay
// children, each a new process (so a new consumer), are killed with
// SIGKILL at random points at least 20 times, then one drains the queue.
// Every accepted write must be applied exactly once at an idempotent
// receiver, or dead-lettered after exactly MaxAttempts attempts; the
// receiver's poison keys must all be dead-lettered, and no write may be
// delivered more than MaxAttempts times. It logs what happened.
func Crash(t *testing.T, open func() (durable.Queue, error)) {
	start := time.Now()
	const n = 400

	// Accept writes, killed at random points a few times.
	accepted := map[string]bool{}
	for kills := 0; ; kills++ {
		c := startChild(t, "enqueue", fmt.Sprint(childN, "=", n))
		var finished bool
		if kills < 5 {
			finished = !c.killAfter(time.Duration(50+rand.IntN(300)) * time.Millisecond)
		} else {
			finished = c.wait()
		}
		for _, line := range c.out {
			if key, ok := strings.CutPrefix(line, "accepted "); ok {
				accepted[key] = true
			}
		}
		if finished {
			break
		}
		require.Less(t, kills, 10, "the enqueue child never finished")
	}
	require.Len(t, accepted, n)

	rcv := &idempotentReceiver{deliveries: map[string]int{}, applied: map[string]int{}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	kills := 0
	for kills < 20 {
		c := startChild(t, "replay", childURL+"="+srv.URL)
		if !c.killAfter(time.Duration(30+rand.IntN(120)) * time.Millisecond) {
			t.Fatalf("the replay child ended after %d kills, before 20", kills)
		}
		kills++
	}
	last := startChild(t, "replay", childURL+"="+srv.URL)
	require.False(t, last.killAfter(45*time.Second), "the last replay child did not drain the queue within 45 s")
	require.True(t, last.wait(), "the last replay child failed")

	q, err := open()
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Depth)
	dead, err := q.DeadLetters(ctx)
	require.NoError(t, err)
	deadKeys := map[string]bool{}
	for _, e := range dead {
		deadKeys[e.Key] = true
		assert.Equal(t, durable.DefaultMaxAttempts, e.Attempts, "%s dead-lettered before MaxAttempts", e.Key)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	duplicates, deadHealthy := 0, 0
	for key := range accepted {
		// Each delivery follows a stored attempt: never more than MaxAttempts.
		assert.LessOrEqual(t, rcv.deliveries[key], durable.DefaultMaxAttempts, "%s delivered more than MaxAttempts times", key)
		if strings.HasPrefix(key, "poison-") {
			assert.True(t, deadKeys[key], "poison %s not dead-lettered", key)
			continue
		}
		if deadKeys[key] {
			deadHealthy++ // its attempts were all cut off by kills
			continue
		}
		assert.Equal(t, 1, rcv.applied[key], "%s lost", key)
		applied, err := q.Applied(ctx, key)
		require.NoError(t, err)
		assert.True(t, applied, key)
		if rcv.deliveries[key] > 1 {
			duplicates++
		}
	}
	t.Logf("%d writes accepted, %d replay kills; %d dead-lettered (%d poison, %d healthy whose %d attempts were all cut off); "+
		"%d keys delivered again after a kill, applied once; %v",
		len(accepted), kills, len(dead), len(dead)-deadHealthy, deadHealthy, durable.DefaultMaxAttempts, duplicates, time.Since(start).Round(time.Millisecond))
}
