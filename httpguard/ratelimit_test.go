package httpguard

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/ratelimit"
)

func TestTransportRateLimitedDegradedIs429WithRetryAfter(t *testing.T) {
	var code atomic.Int32
	code.Store(http.StatusOK)
	srv := statusServer(t, &code)
	clock := new(metrics.ManualClock)
	lim, err := ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 0.4, Burst: 1, Clock: clock})
	require.NoError(t, err)
	tr, tracker, reg := newTestTransport(t, Config{Degrade: true,
		Group: command.GroupConfig{Strategy: command.Semaphore, RateLimit: lim}}, clock)

	resp, err := get(t, tr, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, resp.Body.Close())

	resp, err = get(t, tr, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "429 Too Many Requests", resp.Status)
	assert.Equal(t, "rate_limited", resp.Header.Get("X-Degraded"))
	assert.Equal(t, "3", resp.Header.Get("Retry-After"), "2.5 s to the next token, rounded up")
	require.NoError(t, resp.Body.Close())

	c := counts(t, groupOf(t, reg, srv), "GET")
	assert.EqualValues(t, 1, c[metrics.RateLimited])
	assert.EqualValues(t, 1, c[metrics.FallbackSuccess])
	assert.EqualValues(t, 1, groupOf(t, reg, srv).Breaker().Snapshot().Health.Requests, "the refusal is not the host's failure")
	tracker.requireClosedOnce(t)
}

func TestTransportRateLimitedWithoutDegradeIsAnError(t *testing.T) {
	var code atomic.Int32
	code.Store(http.StatusOK)
	srv := statusServer(t, &code)
	clock := new(metrics.ManualClock)
	lim, err := ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 1, Burst: 1, Clock: clock})
	require.NoError(t, err)
	tr, _, _ := newTestTransport(t, Config{Group: command.GroupConfig{Strategy: command.Semaphore, RateLimit: lim}}, clock)
	resp, err := get(t, tr, srv.URL)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	resp, err = get(t, tr, srv.URL)
	assert.Nil(t, resp)
	assert.ErrorIs(t, err, command.ErrRefused)
	assert.ErrorIs(t, err, ratelimit.ErrLimited)
}
