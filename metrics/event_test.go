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
