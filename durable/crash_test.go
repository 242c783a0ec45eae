package durable_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/durable"
	"github.com/bulwark-go/bulwark/durable/queuetest"
	"github.com/bulwark-go/bulwark/metrics"
)

// Environment of the child processes the crash tests start (the test binary
// run again).
const (
	queueEnv = "BULWARK_DURABLE_QUEUE" // the queue file
	fillEnv  = "BULWARK_DURABLE_FILL"  // set: run childFill
)

// openFromEnv opens the queue file named by queueEnv.
func openFromEnv() (durable.Queue, error) { return durable.OpenStore(os.Getenv(queueEnv)) }

// TestKillLoopUnderOutagesLosesNoWrite runs the kill -9 loop (see
// queuetest.Crash) on the embedded store, whose file one service process
// (writing and replaying) holds at a time: outages and kills once
// dead-lettered valid writes, their deliveries counted as attempts.
func TestKillLoopUnderOutagesLosesNoWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	t.Setenv(queueEnv, filepath.Join(t.TempDir(), "queue.db"))
	queuetest.Crash(t, openFromEnv, queuetest.Service)
}

// runFill is the disk-full child: it fills the queue file and returns the
// exit status.
func runFill() int {
	err := func() error {
		q, err := durable.OpenStore(os.Getenv(queueEnv))
		if err != nil {
			return err
		}
		defer q.Close()
		reg := command.NewRegistry(command.RegistryConfig{Logger: slog.New(slog.DiscardHandler)})
		defer reg.Close(context.Background())
		g, err := reg.NewGroup("orders", command.GroupConfig{Strategy: command.Semaphore})
		if err != nil {
			return err
		}
		return childFill(g, q)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fill child:", err)
		return 1
	}
	return 0
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
		_, info, err := command.ExecuteInfo(context.Background(), g, durable.Write{Command: "createOrder", Key: fmt.Sprint("order-", i), Payload: payload, Apply: down, Queue: q})
		switch {
		case err == nil && info.Events.Has(metrics.DegradedDeferred):
			fmt.Println("accepted", fmt.Sprint("order-", i))
		case errors.Is(err, durable.ErrNotAccepted) && !info.Events.Has(metrics.DegradedDeferred):
			fmt.Println("refused", fmt.Sprint("order-", i), strings.ReplaceAll(err.Error(), "\n", " "))
			return nil
		default:
			return fmt.Errorf("unexpected answer %+v, %v", info, err)
		}
	}
	return errors.New("the file size limit never hit")
}

// TestDiskFullIsNotAccepted fills the queue file under a file size limit
// in a child process: every write answered accepted is in the file, and
// the one refused is not.
func TestDiskFullIsNotAccepted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "queue.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), queueEnv+"="+path, fillEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	require.NoError(t, err)
	var accepted []string
	refused := ""
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := sc.Text()
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
