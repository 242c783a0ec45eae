//go:build !unix

package durable

import (
	"os"
	"time"
)

// lockFile does nothing here: bbolt locks the file after it is verified,
// so a file another process is changing may be found damaged.
func lockFile(*os.File, time.Duration) error { return nil }

// unlockFile does nothing here: closing the file releases bbolt's lock.
func unlockFile(*os.File) {}
