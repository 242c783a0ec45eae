package circuit

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Regression (issue 9, item 8): leaving ForcedClosed kept the window, so 20
// failures recorded while forced closed made the next failure trip the
// breaker at once, contrary to SetMode's documentation.
func TestLeavingForcedClosedRestartsWithEmptyWindow(t *testing.T) {
	for _, to := range []string{"normal", "observe-only"} {
		t.Run(to, func(t *testing.T) {
			r := newRig(t, base())
			r.run("@forced-closed 20*f h =closed @" + to + " =closed")
			assert.Equal(t, Health{}, r.b.Snapshot().Health, "the window is empty")
			r.run("rf") // admitted while forced closed: stale, not counted
			r.run("f =closed")
			assert.Equal(t, Health{Requests: 1, Failures: 1, ErrorRatio: 1}, r.b.Snapshot().Health)
			assert.Empty(t, r.transitions(), "the effective state stayed closed")
		})
	}
}
