package metrics

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every event's label is its name in lower case: one text, two forms.
func TestEventLabels(t *testing.T) {
	for e := range NumEvents {
		assert.NotEmpty(t, e.Label(), "event %d", e)
		assert.Equal(t, strings.ToLower(e.String()), e.Label())
	}
	assert.Equal(t, strings.ToLower(NumEvents.String()), NumEvents.Label())
}

// Attempts sums the primary outcomes only; Calls leaves out the attempts
// marked RETRIED or HEDGED, DegradedRate divides FALLBACK_SUCCESS by
// Calls, and CallEvents holds every event they read.
func TestCountsCallsAndAttempts(t *testing.T) {
	var c Counts
	c[Success], c[Failure], c[Timeout], c[ShortCircuited] = 3, 2, 1, 4
	c[Retried], c[Hedged] = 2, 1
	c[FallbackSuccess], c[ExceptionThrown], c[Slow], c[Probe] = 5, 1, 2, 1
	assert.Equal(t, int64(10), c.Attempts(), "3+2+1+4 primary outcomes")
	assert.Equal(t, int64(7), c.Calls(), "10 attempts, 3 of them retried or hedged")
	assert.Equal(t, 5.0/7, c.DegradedRate())
	assert.Zero(t, Counts{FallbackSuccess: 1}.DegradedRate(), "no call, no rate (and no division by zero)")
	for e := range NumEvents {
		var one Counts
		one[e] = 1
		assert.Equal(t, one.Attempts() == 1 || e == Retried || e == Hedged, CallEvents.Has(e), "%v", e)
	}
}
