//go:build !race

package main

// raceEnabled reports a -race build, in which a run of the chain scenario
// is about ten times slower: tests that would repeat the default run skip
// the repeat.
const raceEnabled = false
