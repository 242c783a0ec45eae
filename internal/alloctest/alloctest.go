// Package alloctest measures what a function allocates on the heap, for
// the tests that hold a type to the bytes it is documented to take.
package alloctest

import (
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// Runs is the number of runs Allocated averages over, in each of Trials.
const Runs, Trials = 50, 5

// Allocated returns the bytes and objects one run of f allocates, averaged
// over Runs, the least of Trials such averages: the process's other
// goroutines (the runtime's, the race detector's, a loaded machine's late
// timers) only ever add allocations, so the least is the closest to f's.
// It reads process-wide MemStats: no test of the calling package may run in
// parallel (t.Parallel) with the tests that call it.
func Allocated(f func()) (bytes, objects float64) {
	bytes, objects = math.Inf(1), math.Inf(1)
	for range Trials {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range Runs {
			f()
		}
		runtime.ReadMemStats(&after)
		bytes = min(bytes, float64(after.TotalAlloc-before.TotalAlloc)/float64(Runs))
		objects = min(objects, float64(after.Mallocs-before.Mallocs)/float64(Runs))
	}
	return bytes, objects
}

// RequireSize checks that bytes is what objects whose sizes sum to want
// take on the heap: want, rounded up to the allocator's size classes,
// which waste at most 1/8 of an object (the classes below 32 KiB; larger
// objects round up to 8 KiB pages).
func RequireSize(t *testing.T, want uintptr, bytes float64, what string) {
	t.Helper()
	require.GreaterOrEqual(t, bytes, float64(want), what)
	require.LessOrEqual(t, bytes, float64(want)*9/8, what)
}

// RequireNone checks that what Allocated measured is no more than the
// test's other goroutines allocate: less than one object of size size in
// all the runs.
func RequireNone(t *testing.T, bytes, objects float64, size uintptr, what string) {
	t.Helper()
	require.Less(t, objects, 0.5, what)
	require.Less(t, bytes*Runs, float64(size), what)
}
