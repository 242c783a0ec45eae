package httpguard

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/metrics"
)

// flakyServer answers 503 with the Retry-After retryAfter (none if empty)
// to its first fails requests, then 200; it counts the requests.
func flakyServer(t *testing.T, fails int64, retryAfter string) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) <= fails {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "busy")
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// retrying returns a group config that retries 3 attempts without a budget
// and records its waits instead of sleeping.
func retrying(slept *[]time.Duration, mu *sync.Mutex) command.GroupConfig {
	return command.GroupConfig{Strategy: command.Semaphore, Retry: retry.Config{
		MaxAttempts: 3, MaxRetryAfter: 2 * time.Second, NoBudget: true,
		Sleep: func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			*slept = append(*slept, d)
			return ctx.Err()
		}}}
}

func TestTransportRetriesAGetHonouringRetryAfter(t *testing.T) {
	srv, hits := flakyServer(t, 1, "1")
	var mu sync.Mutex
	var slept []time.Duration
	tr, tracker, reg := newTestTransport(t, Config{Group: retrying(&slept, &mu)}, nil)
	resp, err := get(t, tr, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "ok", readAll(t, resp))
	assert.EqualValues(t, 2, hits.Load())
	assert.Equal(t, []time.Duration{time.Second}, slept, "the retry waited the Retry-After")
	c := counts(t, groupOf(t, reg, srv), "GET")
	assert.EqualValues(t, 1, c[metrics.Failure])
	assert.EqualValues(t, 1, c[metrics.Success])
	tracker.requireClosedOnce(t)
}

func TestTransportRetryKeepsOnlyTheLastResponse(t *testing.T) {
	srv, hits := flakyServer(t, 100, "")
	var mu sync.Mutex
	var slept []time.Duration
	tr, tracker, _ := newTestTransport(t, Config{Group: retrying(&slept, &mu)}, nil)
	resp, err := get(t, tr, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "the last attempt's 5xx is passed through")
	assert.Equal(t, "busy", readAll(t, resp))
	assert.EqualValues(t, 3, hits.Load())
	assert.Len(t, tracker.closes(), 3)
	tracker.requireClosedOnce(t)
}

func TestTransportRetryRespectsMaxRetryAfter(t *testing.T) {
	srv, hits := flakyServer(t, 1, "120")
	var mu sync.Mutex
	var slept []time.Duration
	tr, tracker, _ := newTestTransport(t, Config{Group: retrying(&slept, &mu)}, nil)
	resp, err := get(t, tr, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "120", resp.Header.Get("Retry-After"), "the caller reads the upstream's Retry-After")
	readAll(t, resp)
	assert.EqualValues(t, 1, hits.Load(), "a 2 min Retry-After is beyond MaxRetryAfter: no retry")
	assert.Empty(t, slept)
	tracker.requireClosedOnce(t)
}

func TestTransportNeverRetriesRequestsThatAreNotIdempotent(t *testing.T) {
	srv, hits := flakyServer(t, 100, "")
	var mu sync.Mutex
	var slept []time.Duration
	tr, tracker, _ := newTestTransport(t, Config{Group: retrying(&slept, &mu)}, nil)
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodGet} {
		hits.Store(0)
		req, err := http.NewRequest(method, srv.URL, strings.NewReader("payload"))
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		readAll(t, resp)
		assert.EqualValues(t, 1, hits.Load(), "%s with a body: one attempt", method)
	}
	assert.Empty(t, slept)
	tracker.requireClosedOnce(t)
}

func TestTransportDegradedFailureCarriesTheUpstreamRetryAfter(t *testing.T) {
	srv, _ := flakyServer(t, 100, "7")
	tr, tracker, _ := newTestTransport(t, Config{DegradeServerErrors: true, Group: command.GroupConfig{Strategy: command.Semaphore}}, nil)
	resp, err := get(t, tr, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, "failure", resp.Header.Get("X-Degraded"))
	assert.Equal(t, "7", resp.Header.Get("Retry-After"))
	readAll(t, resp)
	tracker.requireClosedOnce(t)
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"3":                             3 * time.Second,
		"0":                             0,
		"-5":                            0,
		"soon":                          0,
		"99999999999999999999":          0,
		"Fri, 02 Jan 2026 03:04:35 GMT": 30 * time.Second,
		"Fri, 02 Jan 2026 03:00:00 GMT": 0, // in the past
	} {
		assert.Equal(t, want, parseRetryAfter(v, now), "%q", v)
	}
}
