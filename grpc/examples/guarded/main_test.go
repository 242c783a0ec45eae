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

// field returns the number after name= in text.
func field(t *testing.T, text, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`\b` + name + `=([0-9.]+)`).FindStringSubmatch(text)
	require.NotNil(t, m, "%s= in\n%s", name, text)
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v
}

// TestRun runs the demo briefly and checks its story: the sick server's
// timeouts open the breaker, which short-circuits most calls while the
// server is sick, so that few reach its handlers; the greedy client meets
// the quota and waits out the pushback; every call is counted once.
func TestRun(t *testing.T) {
	p := params{Duration: 4500 * time.Millisecond, Clients: 4, Pace: 20 * time.Millisecond, Quota: 60}
	var out bytes.Buffer
	require.NoError(t, run(&out, p))
	text := out.String()
	t.Log(text)

	assert.Contains(t, text, "4 clients (one greedy) for 4.5s, quota 60/s each; the server is sick from 1.5s to 3s")
	assert.Contains(t, text, "closed->open (error_ratio)", "the sick server opens the breaker")
	calls := field(t, text, "calls")
	assert.Equal(t, calls, field(t, text, "ok")+field(t, text, "failed")+field(t, text, "timeouts")+
		field(t, text, "short_circuited")+field(t, text, "rejected")+field(t, text, "rate_limited"), "every call is counted once")
	assert.Positive(t, field(t, text, "ok"))
	assert.Positive(t, field(t, text, "timeouts"))
	assert.Positive(t, field(t, text, "short_circuited"))
	assert.Positive(t, field(t, text, "rate_limited"), "the greedy client meets its quota")
	m := regexp.MustCompile(`while sick: client_calls=(\d+) handler_calls=(\d+)`).FindStringSubmatch(text)
	require.NotNil(t, m)
	sickClient, _ := strconv.Atoi(m[1])
	sickHandler, _ := strconv.Atoi(m[2])
	assert.Less(t, 2*sickHandler, sickClient, "the breaker spares the sick server most calls")
}
