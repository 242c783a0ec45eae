package durable_test

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
	"path/filepath"
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

// The crash tests run this test binary again as a child process (TestMain
// sees childEnv) and kill it with SIGKILL at random points.
const (
	childEnv    = "BULWARK_DURABLE_CHILD" // the child's mode: enqueue, replay, fill
	childQueue  = "BULWARK_DURABLE_QUEUE" // the queue file
	childURL    = "BULWARK_DURABLE_URL"   // the test receiver
	childN      = "BULWARK_DURABLE_N"     // how many writes to enqueue
	idemHeader  = "Idempotency-Key"
	poisonEvery = 25 // every 25th key is refused by the receiver for good
)

func keyOf(i int) string {
	if i%poisonEvery == poisonEvery-1 {
		return fmt.Sprint("poison-", i)
	}
	return fmt.Sprint("order-", i)
}

// runChild runs one child mode and returns its exit status.
func runChild(mode string) int {
	err := func() error {
		q, err := durable.OpenStore(os.Getenv(childQueue))
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
			return childReplay(g, q)
		case "fill":
			return childFill(g, q)
		}
		return fmt.Errorf("unknown mode %q", mode)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// childEnqueue writes keys 0..N-1 while the backend is down: each is
// deferred, and "accepted KEY" is printed once the call answered so.
func childEnqueue(g *command.Group, q durable.Queue) error {
	var n int
	fmt.Sscan(os.Getenv(childN), &n)
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
func childReplay(g *command.Group, q durable.Queue) error {
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
	r, err := durable.NewReplayer(durable.ReplayerConfig{Queue: q, Group: g, Apply: apply, Logger: slog.New(slog.DiscardHandler),
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

// childFill enqueues 4 KiB writes under a file size limit (RLIMIT_FSIZE,
// the process's "disk full") until one is refused, printing "accepted KEY"
// or "refused KEY" for each call.
func childFill(g *command.Group, q *durable.Store) error {
	fi, err := os.Stat(q.Path())
	if err != nil {
		return err
	}
	lim := uint64(fi.Size()) + 256<<10
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: lim, Max: lim}); err != nil {
		return err
	}
	down := func(context.Context, durable.Entry) error { return errDown }
	payload := []byte(strings.Repeat("x", 4<<10))
	for i := range 10000 {
		_, info, err := command.ExecuteInfo(context.Background(), g, durable.Write{Command: "createOrder", Key: keyOf(i), Payload: payload, Apply: down, Queue: q})
		switch {
		case err == nil && info.Deferred:
			fmt.Println("accepted", keyOf(i))
		case errors.Is(err, durable.ErrNotAccepted) && !info.Deferred:
			fmt.Println("refused", keyOf(i), strings.ReplaceAll(err.Error(), "\n", " "))
			return nil
		default:
			return fmt.Errorf("unexpected answer %+v, %v", info, err)
		}
	}
	return errors.New("the file size limit never hit")
}

// child starts this test binary in mode, with env, its stdout collected in
// out (line by line, safe to read once the child ended).
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
	time.Sleep(time.Millisecond) // widen the window between apply and acknowledge
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

// TestCrashReplayLosesNothingAppliesOnce is the acceptance test of the
// embedded store: a child process accepts writes while the backend is down
// and is killed at random points; another replays them into an idempotent
// receiver and is killed at random points at least 20 times; then one runs
// to the end. Every accepted write must be applied once or dead-lettered
// after exactly MaxAttempts attempts.
func TestCrashReplayLosesNothingAppliesOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	start := time.Now()
	path := filepath.Join(t.TempDir(), "queue.db")
	const n = 400
	queueEnv := childQueue + "=" + path

	// Accept writes, killed at random points a few times.
	accepted := map[string]bool{}
	for kills := 0; ; kills++ {
		c := startChild(t, "enqueue", queueEnv, fmt.Sprint(childN, "=", n))
		finished := false
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
	env := []string{queueEnv, childURL + "=" + srv.URL}
	kills := 0
	for kills < 20 {
		c := startChild(t, "replay", env...)
		if c.killAfter(time.Duration(30+rand.IntN(120)) * time.Millisecond) {
			kills++
			continue
		}
		t.Fatalf("the replay child ended after %d kills, before 20: raise n", kills)
	}
	c := startChild(t, "replay", env...)
	require.True(t, c.wait(), "the last replay child failed")

	q, err := durable.OpenStore(path)
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
		assert.LessOrEqual(t, rcv.deliveries[key], durable.DefaultMaxAttempts+1, key)
		if strings.HasPrefix(key, "poison-") {
			assert.True(t, deadKeys[key], "poison %s not dead-lettered", key)
			assert.LessOrEqual(t, rcv.deliveries[key], durable.DefaultMaxAttempts, "%s delivered more than MaxAttempts times", key)
			continue
		}
		if deadKeys[key] {
			deadHealthy++ // its attempts were all cut off by kills
			continue
		}
		assert.Equal(t, 1, rcv.applied[key], "%s lost or applied twice", key)
		applied, err := q.Applied(ctx, key)
		require.NoError(t, err)
		assert.True(t, applied, key)
		if rcv.deliveries[key] > 1 {
			duplicates++
		}
	}
	t.Logf("%d writes accepted, %d replay kills; %d dead-lettered (%d poison, %d healthy cut off %d times); %d keys delivered again after a kill, applied once; %v",
		len(accepted), kills, len(dead), len(dead)-deadHealthy, deadHealthy, durable.DefaultMaxAttempts, duplicates, time.Since(start).Round(time.Millisecond))
}

// TestDiskFullIsNotAccepted fills the queue file under a file size limit
// in a child process: every write answered accepted is in the file, and
// the one refused is not.
func TestDiskFullIsNotAccepted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "queue.db")
	c := startChild(t, "fill", childQueue+"="+path)
	require.True(t, c.wait())
	var accepted []string
	refused := ""
	for _, line := range c.out {
		if key, ok := strings.CutPrefix(line, "accepted "); ok {
			accepted = append(accepted, key)
		}
		if rest, ok := strings.CutPrefix(line, "refused "); ok {
			refused, _, _ = strings.Cut(rest, " ")
			t.Log("refused:", rest)
		}
	}
	require.NotEmpty(t, accepted)
	require.NotEmpty(t, refused)

	q, err := durable.OpenStore(path)
	require.NoError(t, err)
	defer q.Close()
	es, err := q.Lease(context.Background(), time.Now(), 100000)
	require.NoError(t, err)
	stored := map[string]bool{}
	for _, e := range es {
		stored[e.Key] = true
	}
	for _, key := range accepted {
		assert.True(t, stored[key], "accepted %s is not stored", key)
	}
	assert.False(t, stored[refused], "refused %s is stored", refused)
	assert.Len(t, es, len(accepted))
}

// An unwritable queue file cannot be opened: there is no queue to accept
// into.
func TestUnwritableQueueFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err := durable.OpenStore(filepath.Join(file, "queue.db"))
	assert.ErrorContains(t, err, "open queue file")
	_, err = durable.OpenStore(dir)
	assert.Error(t, err, "a directory is no queue file")
}
