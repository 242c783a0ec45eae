package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/bulwark-go/bulwark/metrics"
)

// TestPacedClockStandsStillWhileTheGeneratorIsLate: the drill's clock
// follows the system clock until the generator's next action is due,
// stands still just before that instant while the generator is late, and
// goes on from it once the generator takes the action, whose due reading
// is the system clock's when it fell due.
func TestPacedClockStandsStillWhileTheGeneratorIsLate(t *testing.T) {
	sys := new(metrics.ManualClock)
	c := newPacedClock(sys)
	sys.Set(10 * ms1)
	assert.Equal(t, 10*ms1, c.Now(), "no action pending: the system clock")
	assert.Equal(t, 10*ms1, c.reach(10*ms1, 20*ms1), "on time")
	sys.Set(15 * ms1)
	assert.Equal(t, 15*ms1, c.Now())
	sys.Set(1020 * ms1) // a second late for the action at 20 ms
	assert.Equal(t, 20*ms1-1, c.Now(), "it stands still before the action")
	assert.Equal(t, 20*ms1, c.reach(20*ms1, 30*ms1), "due a second ago on the system clock")
	assert.Equal(t, 20*ms1, c.Now(), "it goes on from the action's instant")
	sys.Set(1025 * ms1)
	assert.Equal(t, 25*ms1, c.Now())
	sys.Set(1040 * ms1)
	assert.Equal(t, 30*ms1-1, c.Now(), "and stands still again before the next")
}
