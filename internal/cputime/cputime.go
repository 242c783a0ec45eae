//go:build unix

// Package cputime reads the CPU time of the running process, for benchmarks
// that report it beside the wall clock: on a shared machine the wall clock
// also counts the time other processes held the cores, the CPU time does not.
package cputime

import (
	"syscall"
	"testing"
	"time"
)

// Used returns the CPU time the process has used so far: user and system,
// every thread (the benchmark's goroutines, pool workers, timers, the
// runtime's GC). It fails tb if the time cannot be read.
func Used(tb testing.TB) time.Duration {
	tb.Helper()
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		tb.Fatal("cputime: getrusage:", err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
