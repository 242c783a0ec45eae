//go:build !unix

package rules

import "os"

// openFlags open a rules file for reading. Outside Unix there are no FIFOs
// on a file path to block an open.
const openFlags = os.O_RDONLY
