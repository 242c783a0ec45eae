package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
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
	assert.Equal(t, p.During+2, strings.Count(text, "202 Accepted"), "every order during the outage, the refused one and the retry are accepted")
	assert.Contains(t, text, "accepted (FAILURE)")
	assert.Contains(t, text, "accepted (SHORT_CIRCUITED)", "the breaker opened during the outage")
	assert.Contains(t, text, "backlog 21, 21 orders accepted during the outage")
	assert.Contains(t, text, "== drained: 20 replayed, 1 dead-lettered")
	assert.Contains(t, text, "orders applied exactly once: 25 of 25 valid")
	assert.NotRegexp(t, `-> 503 `, text, "no answer is a 503 (the status, not a bare \"503\": that can appear in a timestamp)")

	polls := regexp.MustCompile(`(?m)^GET (\S+) +-> (\d+) (\{.*\})(.*)$`).FindAllStringSubmatch(text, -1)
	require.Len(t, polls, 4, "two polls during the outage, two after")
	type answer struct {
		State, Reason        string
		Attempts, Deliveries int
		AppliedAt            string `json:"applied_at"`
	}
	var got []answer
	for _, m := range polls {
		var a answer
		require.NoError(t, json.Unmarshal([]byte(m[3]), &a), m[0])
		got = append(got, a)
	}
	first := fmt.Sprint("order-", p.Before+1)
	assert.Equal(t, []string{first, "forged-token", first, "order-qty0"}, []string{polls[0][1], polls[1][1], polls[2][1], polls[3][1]})
	assert.Equal(t, "200", polls[0][2])
	assert.Equal(t, "accepted", got[0].State)
	assert.Contains(t, polls[0][4], "Retry-After", "a client polling an accepted order is told when to ask again")
	assert.Equal(t, "404", polls[1][2], "a forged token")
	assert.Equal(t, "unknown", got[1].State)
	assert.Equal(t, "200", polls[2][2])
	assert.Equal(t, "applied", got[2].State)
	assert.NotEmpty(t, got[2].AppliedAt)
	assert.GreaterOrEqual(t, got[2].Deliveries, 2, "its original call and its replay")
	assert.Equal(t, "200", polls[3][2])
	assert.Equal(t, "dead_lettered", got[3].State)
	assert.Equal(t, "bad_request", got[3].Reason)
	assert.Equal(t, 1, got[3].Attempts, "refused at its first replay: one attempt, dead-lettered")
	assert.GreaterOrEqual(t, got[3].Deliveries, 1)
}
