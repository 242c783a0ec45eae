package rules

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/logtest"
)

// watching runs m.Watch on path every millisecond until the test ends, and
// returns its error channel.
func watching(t *testing.T, m *Manager, path string) <-chan error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { done <- m.Watch(ctx, path, time.Millisecond) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return done
}

// TestWatchLogsUnreadableFileOncePerEpisode: a missing rules file used to
// be logged at Error level at every poll (four times a second by
// default). It is logged once while it stays missing, once at Info level
// when it comes back, and once again if it goes missing again.
func TestWatchLogsUnreadableFileOncePerEpisode(t *testing.T) {
	var logs logtest.Buffer
	reg := newRegistry(t)
	m, err := NewManager(reg, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "rules.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"groups": {"db": {"maxConcurrent": 4}}}`), 0o600))
	watching(t, m, path)
	require.Eventually(t, func() bool { _, ok := reg.Group("db"); return ok }, 5*time.Second, time.Millisecond)

	count := func(msg string) int { return strings.Count(logs.String(), msg) }
	const missing, back = "rules file unreadable", "rules file readable again"
	require.NoError(t, os.Remove(path))
	require.Eventually(t, func() bool { return count(missing) > 0 }, 5*time.Second, time.Millisecond)
	time.Sleep(100 * time.Millisecond) // about 100 polls
	assert.Equal(t, 1, count(missing), "once for the episode")
	assert.Contains(t, logs.String(), "no such file or directory")

	require.NoError(t, os.WriteFile(path, []byte(`{"groups": {"db": {"maxConcurrent": 5}}}`), 0o600))
	require.Eventually(t, func() bool { return count(back) > 0 }, 5*time.Second, time.Millisecond)
	db, _ := reg.Group("db")
	require.Eventually(t, func() bool { return db.Config().MaxConcurrent == 5 }, 5*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, 1, count(missing))
	assert.Equal(t, 1, count(back))

	require.NoError(t, os.Remove(path))
	require.Eventually(t, func() bool { return count(missing) == 2 }, 5*time.Second, time.Millisecond, "a new episode")
}

// TestWatchSkipsUnchangedFile: a large rules file used to be read again at
// every poll (a 100 MiB file: about 1 GiB allocated a second while nothing
// changed). A file whose stat has not moved is not read: over about 100
// polls of an unchanged 1 MiB file, far less than one file's size is
// allocated. A file renamed over it is read and applied.
func TestWatchSkipsUnchangedFile(t *testing.T) {
	reg := newRegistry(t)
	m := newManager(t, reg)
	path := filepath.Join(t.TempDir(), "rules.json")
	doc := func(n int) []byte {
		return []byte(fmt.Sprintf(`{"groups": {"db": {"maxConcurrent": %d}}}`, n) + strings.Repeat(" ", 1<<20))
	}
	require.NoError(t, os.WriteFile(path, doc(4), 0o600))
	long := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(path, long, long)) // settled: its stat tells a change
	watching(t, m, path)
	require.Eventually(t, func() bool { _, ok := reg.Group("db"); return ok }, 5*time.Second, time.Millisecond)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	time.Sleep(100 * time.Millisecond)
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	assert.Less(t, allocated, uint64(1<<20)/2, "allocated over 100 ms of polls of an unchanged file")

	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, doc(7), 0o600))
	require.NoError(t, os.Chtimes(tmp, long, long)) // the same size and time: another file all the same
	require.NoError(t, os.Rename(tmp, path))
	db, _ := reg.Group("db")
	require.Eventually(t, func() bool { return db.Config().MaxConcurrent == 7 }, 5*time.Second, time.Millisecond)
}

// TestWatchReadsFileWrittenTwiceWithinATimestampTick: two writes of the
// same size whose modification times are equal (a filesystem's timestamps
// are coarse) are told apart: a file modified less than a moment before it
// was read is read again.
func TestWatchReadsFileWrittenTwiceWithinATimestampTick(t *testing.T) {
	reg := newRegistry(t)
	m := newManager(t, reg)
	path := filepath.Join(t.TempDir(), "rules.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"groups": {"db": {"maxConcurrent": 4}}}`), 0o600))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	watching(t, m, path)
	require.Eventually(t, func() bool { _, ok := reg.Group("db"); return ok }, 5*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // polls that find the stat as it was

	require.NoError(t, os.WriteFile(path, []byte(`{"groups": {"db": {"maxConcurrent": 6}}}`), 0o600))
	require.NoError(t, os.Chtimes(path, fi.ModTime(), fi.ModTime()))
	db, _ := reg.Group("db")
	require.Eventually(t, func() bool { return db.Config().MaxConcurrent == 6 }, 5*time.Second, time.Millisecond)
}

// TestFileOverMaxSizeIsRefused: a rules file over MaxFileSize is refused
// with its size, by LoadFile and by Watch at start, before it is read (it
// used to be read whole, then refused as a document).
func TestFileOverMaxSizeIsRefused(t *testing.T) {
	m := newManager(t, newRegistry(t))
	path := filepath.Join(t.TempDir(), "rules.json")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(MaxFileSize+1)) // sparse: nothing is written
	require.NoError(t, f.Close())
	want := "rules: " + path + ": 16777217 bytes is over MaxFileSize (16777216 bytes)"
	require.EqualError(t, m.LoadFile(path), want)
	require.EqualError(t, m.Watch(context.Background(), path, time.Millisecond), want)
}

// TestLoadFileRefusesDirectory: a path that names no regular file is
// refused as such (ErrNotRegular).
func TestLoadFileRefusesDirectory(t *testing.T) {
	m := newManager(t, newRegistry(t))
	dir := t.TempDir()
	err := m.LoadFile(dir)
	require.ErrorIs(t, err, ErrNotRegular)
	require.ErrorContains(t, err, dir+": not a regular file (d---------): a rules file must be one")
}

// TestEpisodeIgnoresTheOperation: a file removed between a poll's stat and
// its open fails the open, then the next poll's stat: one episode. Another
// error is another episode.
func TestEpisodeIgnoresTheOperation(t *testing.T) {
	open := &fs.PathError{Op: "open", Path: "rules.json", Err: syscall.ENOENT}
	stat := &fs.PathError{Op: "stat", Path: "rules.json", Err: syscall.ENOENT}
	assert.Equal(t, episode(open), episode(stat))
	assert.Equal(t, episode(open), episode(fmt.Errorf("rules: %w", stat)), "wrapped")
	assert.NotEqual(t, episode(open), episode(&fs.PathError{Op: "open", Path: "rules.json", Err: syscall.EACCES}))
	assert.Equal(t, "too big", episode(errors.New("too big")))
}
