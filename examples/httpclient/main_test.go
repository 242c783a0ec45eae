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

// TestMain fails the run if the demo leaves a goroutine behind (the ants
// package's own default pool, started when it loads, excepted).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

func TestRun(t *testing.T) {
	p := params{Requests: 80, Pace: 20 * time.Millisecond, FailFrom: 200 * time.Millisecond,
		FailTo: 600 * time.Millisecond, OpenDuration: 500 * time.Millisecond}
	var out bytes.Buffer
	require.NoError(t, run(&out, p))
	text := out.String()

	assert.Equal(t, p.Requests+1, strings.Count(text, " GET /"), text)
	for _, want := range []string{
		"GET /nope        404 Not Found",
		"GET /price       200 OK 101.50",
		"GET /price       500 Internal Server Error database unavailable",
		"503 Service Unavailable, degraded: X-Degraded: short_circuited, Retry-After: 1",
		"closed    -> open      error_ratio",
		"half-open -> closed    probes_succeeded",
		"BAD_REQUEST=1 ",
		"FAILURE=",
	} {
		assert.Contains(t, text, want)
	}
	// The 503s come from the transport, at once, not from the server: the
	// server never answers 503.
	assert.NotContains(t, text, "503 Service Unavailable database")
}
