package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

// TestRun runs the program for 3 s on a free port, every trace printed:
// the spans carry bulwark's attributes; the scrape shows the calls, the
// outage's outcomes and the breakers' trip and recovery.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(&out, params{Addr: "127.0.0.1:0", Duration: 3 * time.Second, Pace: 5 * time.Millisecond, Sample: 1}))
	spans, scrape, ok := strings.Cut(out.String(), "--- from ")
	require.True(t, ok, "the summary follows the spans")
	assert.Contains(t, spans, `"Name":"bulwark inventory/stock"`)
	assert.Contains(t, spans, `{"Key":"bulwark.event","Value":{"Type":"STRING","Value":"success"}}`)
	assert.Contains(t, spans, `{"Key":"bulwark.fallback","Value":{"Type":"STRING","Value":"fallback_success"}}`)
	t.Log(scrape)
	assert.Regexp(t, `bulwark_command_calls_total\{bulwark_command="stock",bulwark_group="inventory".*\} \d+`, scrape)
	assert.Regexp(t, `bulwark_command_events_total\{.*bulwark_event="fallback_success".*\} \d+`, scrape)
	assert.Regexp(t, `bulwark_(group|command)_circuit_transitions_total\{bulwark_circuit_from="closed",bulwark_circuit_reason="error_ratio",bulwark_circuit_to="open".*\} \d+`, scrape)
	assert.Regexp(t, `bulwark_(group|command)_circuit_transitions_total\{.*bulwark_circuit_reason="probes_succeeded".*\} \d+`, scrape)
}
