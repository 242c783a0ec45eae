package main

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain fails the run if the demo leaves a goroutine behind (the ants
// package's own default pool, started when it loads, excepted).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

// field returns the integer or float after name= in text.
func field(t *testing.T, text, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`\b` + name + `=([0-9.]+)`).FindStringSubmatch(text)
	require.NotNil(t, m, "%s= in\n%s", name, text)
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v
}

// TestRun runs the gateway briefly, with a tight quota and a backend that
// fails half of its requests (and all of them in its outage), and checks
// the summary: the limiter refused some requests, retries happened, the
// breaker opened (in the outage if not before), and the retry budget kept the backend's load near 1.2×
// of the forwarded requests (the bound is loose: the window also allows 1
// retry per second, and concurrent calls may overshoot a little).
func TestRun(t *testing.T) {
	// The polite clients (a request every 40 ms at most) stay under their
	// quota of 30/s; the greedy one (every 10 ms) cannot.
	p := params{Duration: 1500 * time.Millisecond, Clients: 4, Pace: 40 * time.Millisecond, Quota: 30, Burst: 1, Fail: 0.5}
	var out bytes.Buffer
	require.NoError(t, run(&out, p))
	text := out.String()
	t.Log(text)

	assert.Contains(t, text, "4 clients (one greedy) for 1.5s, quota 30/s (burst 1) each; the backend fails 50% of requests, all of them from 500ms to 1s")
	assert.Contains(t, text, "closed->open (error_ratio)", "the outage opens the breaker")
	requests := field(t, text, "requests")
	assert.Equal(t, requests, field(t, text, "ok")+field(t, text, "limited")+field(t, text, "degraded")+
		field(t, text, "upstream_5xx")+field(t, text, "errors"), "every client request is counted once")
	assert.Positive(t, field(t, text, "ok"))
	assert.Positive(t, field(t, text, "limited"), "the per-client quota refused requests with 429")
	assert.Positive(t, field(t, text, "retries"))
	forwarded, hits := field(t, text, "forwarded"), field(t, text, "backend_hits")
	assert.Equal(t, requests-field(t, text, "limited"), forwarded, "the limiter is in front: refused requests are never forwarded")
	assert.LessOrEqual(t, hits, 1.35*forwarded+3, "the retry budget holds the load near 1.2x")
}
