package rules

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// MaxFileSize is the largest rules file LoadFile and Watch read: 16 MiB,
// thousands of times a large document. A larger file is refused, with its
// size, before it is read.
const MaxFileSize = 16 << 20

// ErrNotRegular is matched by the error about a rules file path that names
// no regular file (a FIFO, a device, a directory): reading a FIFO would
// block until a writer came, past any cancellation.
var ErrNotRegular = errors.New("not a regular file")

// readFile reads the rules file at path and returns its contents and
// stat, or an error: path's, ErrNotRegular, or a size over MaxFileSize. It
// opens path without blocking (a FIFO would otherwise block the open until
// a writer came) and checks what it opened before reading it.
func readFile(path string) ([]byte, os.FileInfo, error) {
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, nil, err
	case !fi.Mode().IsRegular():
		return nil, nil, fmt.Errorf("%s: %w (%v): a rules file must be one", path, ErrNotRegular, fi.Mode().Type())
	case fi.Size() > MaxFileSize:
		return nil, nil, fmt.Errorf("%s: %d bytes is over MaxFileSize (%d bytes)", path, fi.Size(), MaxFileSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	case len(data) > MaxFileSize:
		return nil, nil, fmt.Errorf("%s: over MaxFileSize (%d bytes) by the end of its read", path, MaxFileSize)
	}
	return data, fi, nil
}

// settle is how long after its modification time a file's stat is trusted
// to tell a change: a filesystem keeps modification times in ticks (a few
// milliseconds on Linux, 2 s on FAT), so two writes of the same size within
// one tick leave the same stat.
const settle = 2 * time.Second

// stamp is what Watch knows of the rules file as last read.
type stamp struct {
	info   os.FileInfo
	sum    [sha256.Size]byte // of its contents
	readAt time.Time
}

// unchanged reports whether fi, the file's stat now, shows no change since
// s was read: the same file (not one renamed in its place), size and
// modification time, and a modification time older than the read by
// settle, so that a write after the read would have moved it.
func (s stamp) unchanged(fi os.FileInfo) bool {
	return s.info != nil && os.SameFile(s.info, fi) && fi.Size() == s.info.Size() && fi.ModTime().Equal(s.info.ModTime()) &&
		s.readAt.Sub(s.info.ModTime()) > settle
}
