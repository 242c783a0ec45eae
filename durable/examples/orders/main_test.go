package main

import (
	"bytes"
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
	p := defaultParams()
	require.NoError(t, run(&out, p))
	text := out.String()
	t.Log(text)
	assert.Equal(t, p.Before, strings.Count(text, "201 Created"), "orders while up are created at once")
	assert.Equal(t, p.During+1, strings.Count(text, "202 Accepted"), "every order during the outage, and the retry, is accepted")
	assert.Contains(t, text, "accepted (FAILURE)")
	assert.Contains(t, text, "accepted (SHORT_CIRCUITED)", "the breaker opened during the outage")
	assert.Contains(t, text, "backlog 20, 20 orders accepted during the outage")
	assert.Contains(t, text, "== drained: 20 replayed, 0 dead-lettered")
	assert.Contains(t, text, "orders applied exactly once: 25 of 25")
	assert.NotContains(t, text, "503")
}
