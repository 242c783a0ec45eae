package browsertest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind. IgnoreCurrent
// spares the goroutines present before any test: those of ants' default
// pool, which the ants package starts when it is loaded.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}
