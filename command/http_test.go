package command

import (
	"errors"
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

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/metrics"
)

// bodyTracker is a base RoundTripper that counts response bodies opened and
// closed, so tests can prove none leaks.
type bodyTracker struct {
	base           *http.Transport
	opened, closed atomic.Int32
}

func newBodyTracker(t *testing.T) *bodyTracker {
	b := &bodyTracker{base: &http.Transport{}}
	t.Cleanup(b.base.CloseIdleConnections)
	return b
}

func (b *bodyTracker) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.base.RoundTrip(req)
	if err == nil {
		b.opened.Add(1)
		resp.Body = &trackedBody{ReadCloser: resp.Body, closed: &b.closed}
	}
	return resp, err
}

type trackedBody struct {
	io.ReadCloser
	once   sync.Once
	closed *atomic.Int32
}

func (b *trackedBody) Close() error {
	b.once.Do(func() { b.closed.Add(1) })
	return b.ReadCloser.Close()
}

// statusServer answers every request with the status in *code.
func statusServer(t *testing.T, code *atomic.Int32) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(code.Load()))
		_, _ = io.WriteString(w, "body of "+http.StatusText(int(code.Load())))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func newTestTransport(t *testing.T, cfg TransportConfig) (*Transport, *bodyTracker, *Registry, *metrics.ManualClock) {
	reg, clock := newTestRegistry(t)
	tracker := newBodyTracker(t)
	cfg.Base = tracker
	tr, err := NewTransport(reg, cfg)
	require.NoError(t, err)
	return tr, tracker, reg, clock
}

func get(t *testing.T, tr http.RoundTripper, url string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	return tr.RoundTrip(req)
}

func hostOf(srv *httptest.Server) string { return strings.TrimPrefix(srv.URL, "http://") }

func TestTransportOutcomes(t *testing.T) {
	for _, s := range []Strategy{Thread, Semaphore} {
		t.Run(s.String(), func(t *testing.T) {
			var code atomic.Int32
			srv := statusServer(t, &code)
			tr, tracker, reg, _ := newTestTransport(t, TransportConfig{Group: GroupConfig{Strategy: s}})

			code.Store(200)
			resp, err := get(t, tr, srv.URL)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err, "the body is readable after RoundTrip returned")
			assert.Equal(t, "body of OK", string(body))
			require.NoError(t, resp.Body.Close())

			code.Store(404)
			resp, err = get(t, tr, srv.URL)
			require.NoError(t, err, "a 4xx is a response, not an error")
			assert.Equal(t, 404, resp.StatusCode)
			require.NoError(t, resp.Body.Close())

			code.Store(503)
			resp, err = get(t, tr, srv.URL)
			assert.Nil(t, resp)
			var se *StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, 503, se.StatusCode)
			assert.ErrorIs(t, err, ErrFallbackMissing)

			g, ok := reg.Group(hostOf(srv))
			require.True(t, ok, "a group per host, named as URL.Host")
			c := counts(t, g, "GET")
			assert.Equal(t, int64(1), c[metrics.Success])
			assert.Equal(t, int64(1), c[metrics.BadRequest])
			assert.Equal(t, int64(1), c[metrics.Failure])
			h := g.breaker.Snapshot().Health
			assert.Equal(t, int64(2), h.Requests, "the 4xx is not counted")
			assert.Equal(t, int64(1), h.Failures)
			assert.Equal(t, tracker.opened.Load(), tracker.closed.Load(), "no response body leaks")
		})
	}
}

// TestTransport429IsIgnored: a 429 counts neither as a failure nor as a
// success. 10 failures among 40 calls would be 25% if the 429s counted as
// successes; ignored, the breaker sees 10 failures out of 10 and opens.
func TestTransport429IsIgnored(t *testing.T) {
	var code atomic.Int32
	srv := statusServer(t, &code)
	tr, tracker, reg, _ := newTestTransport(t, TransportConfig{Group: GroupConfig{Strategy: Semaphore,
		CommandBreaker: circuit.Config{MinRequests: 10, FailureRatio: 0.5}}})
	code.Store(429)
	for range 30 {
		resp, err := get(t, tr, srv.URL)
		require.NoError(t, err)
		require.Equal(t, 429, resp.StatusCode)
		require.NoError(t, resp.Body.Close())
	}
	g, _ := reg.Group(hostOf(srv))
	br, _ := g.CommandBreaker("GET")
	assert.Zero(t, br.Snapshot().Health.Requests)
	code.Store(500)
	for range 10 {
		_, err := get(t, tr, srv.URL)
		require.Error(t, err)
	}
	assert.Equal(t, circuit.Open, br.State())
	assert.Equal(t, tracker.opened.Load(), tracker.closed.Load())
}

func TestTransportDegradedResponse(t *testing.T) {
	var code atomic.Int32
	code.Store(500)
	srv := statusServer(t, &code)
	tr, tracker, reg, clock := newTestTransport(t, TransportConfig{Degrade: true, Group: GroupConfig{Strategy: Semaphore,
		Breaker: circuit.Config{MinRequests: 5, OpenDuration: 5 * time.Second}}})
	for range 5 {
		_, err := get(t, tr, srv.URL)
		var se *StatusError
		require.ErrorAs(t, err, &se, "failures are errors even with Degrade")
	}
	g, _ := reg.Group(hostOf(srv))
	require.Equal(t, circuit.Open, g.Breaker().State())

	clock.Advance(1500 * time.Millisecond)
	reqBody := &closeCounter{Reader: strings.NewReader("payload")}
	req, err := http.NewRequest(http.MethodPost, srv.URL, reqBody)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "4", resp.Header.Get("Retry-After"), "3.5 s left, rounded up")
	assert.Equal(t, "short_circuited", resp.Header.Get("X-Degraded"))
	assert.Same(t, req, resp.Request)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, 1, reqBody.closes, "the unsent request body is closed")

	clock.Advance(3400 * time.Millisecond)
	resp, err = get(t, tr, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"), "never below 1")

	c := counts(t, g, "POST")
	assert.Equal(t, int64(1), c[metrics.FallbackSuccess], "a degraded response is a fallback value")
	assert.Equal(t, tracker.opened.Load(), tracker.closed.Load())
}

type closeCounter struct {
	io.Reader
	closes int
}

func (c *closeCounter) Close() error { c.closes++; return nil }

func TestTransportShortCircuitError(t *testing.T) {
	var code atomic.Int32
	srv := statusServer(t, &code)
	tr, _, _, _ := newTestTransport(t, TransportConfig{Group: GroupConfig{Breaker: circuit.Config{Mode: circuit.ForcedOpen}}})
	resp, err := get(t, tr, srv.URL)
	assert.Nil(t, resp)
	assert.ErrorIs(t, err, ErrShortCircuited)
	assert.ErrorIs(t, err, circuit.ErrOpen)
}

func TestTransportRejectedDegraded(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			close(entered)
			<-release
		}
	}))
	defer srv.Close()
	tr, tracker, _, _ := newTestTransport(t, TransportConfig{Degrade: true,
		Group: GroupConfig{Strategy: Semaphore, MaxConcurrent: 1, Timeout: NoTimeout}})
	var wg sync.WaitGroup
	wg.Go(func() {
		resp, err := get(t, tr, srv.URL+"/hold")
		if assert.NoError(t, err) {
			resp.Body.Close()
		}
	})
	<-entered
	resp, err := get(t, tr, srv.URL)
	close(release)
	wg.Wait()
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "semaphore_rejected", resp.Header.Get("X-Degraded"))
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Equal(t, tracker.opened.Load(), tracker.closed.Load())
}

func TestTransportTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // hangs until the client gives up
	}))
	defer srv.Close()
	tr, tracker, reg, _ := newTestTransport(t, TransportConfig{Group: GroupConfig{Timeout: 20 * time.Millisecond}})
	resp, err := get(t, tr, srv.URL)
	assert.Nil(t, resp)
	assert.ErrorIs(t, err, ErrTimeout)
	g, _ := reg.Group(hostOf(srv))
	assert.Equal(t, int64(1), counts(t, g, "GET")[metrics.Timeout])
	// The detached worker ends once its request is cancelled.
	require.Eventually(t, func() bool { return g.pool.Stats().Active == 0 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, tracker.opened.Load(), tracker.closed.Load())
}

// TestTransportGroupPerHost: a failing host opens its own group's breaker;
// another host is unaffected.
func TestTransportGroupPerHost(t *testing.T) {
	var badCode, goodCode atomic.Int32
	badCode.Store(502)
	goodCode.Store(200)
	bad, good := statusServer(t, &badCode), statusServer(t, &goodCode)
	tr, tracker, reg, _ := newTestTransport(t, TransportConfig{Group: GroupConfig{Strategy: Semaphore,
		Breaker: circuit.Config{MinRequests: 5}}})
	for range 5 {
		_, err := get(t, tr, bad.URL)
		require.Error(t, err)
	}
	_, err := get(t, tr, bad.URL)
	assert.ErrorIs(t, err, ErrShortCircuited)
	resp, err := get(t, tr, good.URL)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	gb, _ := reg.Group(hostOf(bad))
	gg, _ := reg.Group(hostOf(good))
	assert.Equal(t, circuit.Open, gb.Breaker().State())
	assert.Equal(t, circuit.Closed, gg.Breaker().State())
	assert.Equal(t, tracker.opened.Load(), tracker.closed.Load())
}

func TestTransportUsesExistingGroup(t *testing.T) {
	var code atomic.Int32
	code.Store(200)
	srv := statusServer(t, &code)
	tr, _, reg, _ := newTestTransport(t, TransportConfig{})
	own, err := reg.NewGroup(hostOf(srv), GroupConfig{Strategy: Semaphore, MaxConcurrent: 3})
	require.NoError(t, err)
	g, err := tr.Group(hostOf(srv))
	require.NoError(t, err)
	assert.Same(t, own, g)
}

func TestTransportInvalidConfig(t *testing.T) {
	reg, _ := newTestRegistry(t)
	_, err := NewTransport(reg, TransportConfig{Group: GroupConfig{MaxConcurrent: -1}})
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.ErrorContains(t, err, "MaxConcurrent -1")
}

func TestTransportWithHTTPClient(t *testing.T) {
	var code atomic.Int32
	code.Store(500)
	srv := statusServer(t, &code)
	tr, _, _, _ := newTestTransport(t, TransportConfig{})
	client := &http.Client{Transport: tr}
	_, err := client.Get(srv.URL)
	var se *StatusError
	require.ErrorAs(t, err, &se, "the cause survives http.Client's *url.Error")
	assert.True(t, errors.Is(err, ErrFallbackMissing))
}
