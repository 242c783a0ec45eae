//go:build race

package command

// raceEnabled reports a -race build, whose sync.Pool drops items at random:
// allocation counts of the pool path are not meaningful there.
const raceEnabled = true
