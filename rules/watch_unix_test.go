//go:build unix

package rules

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/logtest"
)

// unblock opens the FIFO at path for writing and closes it, which ends a
// read blocked on it (the code before the fix blocked there).
func unblock(path string) {
	if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		f.Close()
	}
}

// TestWatchRefusesFIFOAndHonoursCancel: Watch used to block in its read
// once the path named a FIFO, and then ignore the end of its ctx. A FIFO
// is refused (ErrNotRegular), at start and at a poll, where it is logged,
// and Watch returns once ctx ends.
func TestWatchRefusesFIFOAndHonoursCancel(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	t.Cleanup(func() { unblock(fifo) })
	var logs logtest.Buffer
	reg := newRegistry(t)
	m, err := NewManager(reg, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)

	returned := func(ctx context.Context, path string) <-chan error {
		done := make(chan error, 1)
		go func() { done <- m.Watch(ctx, path, time.Millisecond) }()
		return done
	}
	select {
	case err := <-returned(context.Background(), fifo):
		require.ErrorIs(t, err, ErrNotRegular)
		require.ErrorContains(t, err, fifo+": not a regular file (p---------)")
	case <-time.After(5 * time.Second):
		unblock(fifo)
		t.Fatal("Watch blocked on a FIFO at start")
	}
	require.ErrorIs(t, m.LoadFile(fifo), ErrNotRegular)

	path := filepath.Join(dir, "rules.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"groups": {"db": {"maxConcurrent": 4}}}`), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	done := returned(ctx, path)
	require.Eventually(t, func() bool { _, ok := reg.Group("db"); return ok }, 5*time.Second, time.Millisecond)
	require.NoError(t, os.Rename(fifo, path))
	t.Cleanup(func() { unblock(path) })
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "not a regular file") }, 2*time.Second, time.Millisecond,
		"the FIFO is refused at a poll, and logged")
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		unblock(path)
		<-done
		t.Fatal("Watch ignored the end of its ctx")
	}
}
