//go:build !race

package isolation

// raceEnabled reports a -race build, where allocation counts are not meaningful.
const raceEnabled = false
