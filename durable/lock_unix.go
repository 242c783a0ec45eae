//go:build unix

package durable

import (
	"os"
	"syscall"
	"time"

	berrors "go.etcd.io/bbolt/errors"
)

// lockFile takes the exclusive lock bbolt takes on f, waiting up to
// timeout (bbolt's ErrTimeout after it), so that the file is verified
// while no other process changes it; bbolt's own lock on f then holds
// already.
func lockFile(f *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EWOULDBLOCK {
			return err
		}
		if time.Now().After(deadline) {
			return berrors.ErrTimeout
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// unlockFile releases the lock on f. Closing f alone would not: the lock
// belongs to the open file, which a memory mapping of it keeps open.
func unlockFile(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
