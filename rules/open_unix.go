//go:build unix

package rules

import (
	"os"
	"syscall"
)

// openFlags open a rules file for reading without blocking: opening a FIFO
// blocks until a writer comes, unless it is opened non-blocking (readFile
// then refuses it).
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK
