package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain fails the run if the demo leaves a goroutine behind (the ants
// package's own default pool, started when it loads, excepted).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

func TestRun(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(&out, defaultParams()))
	text := out.String()

	// Every call is reported, and the story shows: failures served from the
	// last good value, the breaker opening, short-circuits served degraded,
	// and the breaker closing after the outage.
	assert.Equal(t, defaultParams().Calls, strings.Count(text, "stock="), text)
	for _, want := range []string{
		"FAILURE          FALLBACK_SUCCESS     stock=",
		"(degraded)",
		"SHORT_CIRCUITED  FALLBACK_SUCCESS",
		"closed    -> open      error_ratio",
		"half-open -> closed    probes_succeeded",
		"summary of inventory/checkStock",
	} {
		assert.Contains(t, text, want)
	}

	// The last line is the go-metrics registry as JSON.
	lines := strings.Split(strings.TrimSpace(text), "\n")
	var dump map[string]map[string]float64
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &dump))
	assert.Equal(t, float64(defaultParams().Calls), dump["command.inventory.checkStock.calls"]["count"])
	assert.Positive(t, dump["command.inventory.checkStock.cumulative.short_circuited"]["value"])
	assert.Positive(t, dump["group.inventory.rolling.max"]["value"])
}
