//go:build unix

package durable

import (
	"os"
	"syscall"
)

// unlockFile releases the lock bbolt took on f. Closing f alone would not:
// the lock belongs to the open file, which a memory mapping of it keeps
// open.
func unlockFile(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
