package httpguard

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// bodyTracker is a base RoundTripper that wraps every response body to
// count its Close calls, so tests can prove each is closed exactly once.
type bodyTracker struct {
	base *http.Transport

	mu     sync.Mutex
	bodies []*trackedBody
}

func newBodyTracker(t *testing.T) *bodyTracker {
	// One connection per host: a body left open holds it, and the next
	// request to the host would wait for it.
	b := &bodyTracker{base: &http.Transport{MaxConnsPerHost: 1}}
	t.Cleanup(b.base.CloseIdleConnections)
	return b
}

func (b *bodyTracker) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.base.RoundTrip(req)
	if err == nil {
		tb := &trackedBody{ReadCloser: resp.Body}
		resp.Body = tb
		b.mu.Lock()
		b.bodies = append(b.bodies, tb)
		b.mu.Unlock()
	}
	return resp, err
}

// closes returns how many times each body was closed.
func (b *bodyTracker) closes() []int32 {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := make([]int32, len(b.bodies))
	for i, tb := range b.bodies {
		n[i] = tb.closes.Load()
	}
	return n
}

// requireClosedOnce checks that every body was closed exactly once.
func (b *bodyTracker) requireClosedOnce(t *testing.T) {
	t.Helper()
	for i, n := range b.closes() {
		require.Equal(t, int32(1), n, "body %d closed %d times", i, n)
	}
}

type trackedBody struct {
	io.ReadCloser
	closes atomic.Int32
}

func (b *trackedBody) Close() error {
	b.closes.Add(1)
	return b.ReadCloser.Close()
}

// statusServer answers every request with the status in *code.
func statusServer(t *testing.T, code *atomic.Int32) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code.Load() == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "120")
		}
		w.WriteHeader(int(code.Load()))
		_, _ = io.WriteString(w, "body of "+http.StatusText(int(code.Load())))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func newTestTransport(t *testing.T, cfg Config, clock metrics.Clock) (*Transport, *bodyTracker, *command.Registry) {
	reg := newTestRegistry(t, clock)
	tracker := newBodyTracker(t)
	cfg.Base = tracker
	tr, err := NewTransport(reg, cfg)
	require.NoError(t, err)
	return tr, tracker, reg
}

func get(t *testing.T, tr http.RoundTripper, url string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	return tr.RoundTrip(req)
}

// groupOf returns the group of srv's host.
func groupOf(t *testing.T, reg *command.Registry, srv *httptest.Server) *command.Group {
	t.Helper()
	g, ok := reg.Group(strings.TrimPrefix(srv.URL, "http://"))
	require.True(t, ok, "a group per host, named host:port")
	return g
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "the body is readable after RoundTrip returned")
	require.NoError(t, resp.Body.Close())
	return string(body)
}

// TestTransportOutcomes: 2xx, 4xx and 5xx all reach the caller as
// responses with their bodies; the 5xx counts as a failure in the breakers.
func TestTransportOutcomes(t *testing.T) {
	for _, s := range []command.Strategy{command.Thread, command.Semaphore} {
		t.Run(s.String(), func(t *testing.T) {
			var code atomic.Int32
			srv := statusServer(t, &code)
			tr, tracker, reg := newTestTransport(t, Config{Group: command.GroupConfig{Strategy: s}}, nil)

			code.Store(200)
			resp, err := get(t, tr, srv.URL)
			require.NoError(t, err)
			assert.Equal(t, "body of OK", readAll(t, resp))

			code.Store(404)
			resp, err = get(t, tr, srv.URL)
			require.NoError(t, err, "a 4xx is a response, not an error")
			assert.Equal(t, 404, resp.StatusCode)
			assert.Equal(t, "body of Not Found", readAll(t, resp))

			code.Store(503)
			resp, err = get(t, tr, srv.URL)
			require.NoError(t, err, "a 5xx is a response, not an error")
			assert.Equal(t, 503, resp.StatusCode)
			assert.Equal(t, "120", resp.Header.Get("Retry-After"), "the upstream's headers")
			assert.Equal(t, "body of Service Unavailable", readAll(t, resp))

			g := groupOf(t, reg, srv)
			c := counts(t, g, "GET")
			assert.Equal(t, int64(1), c[metrics.Success])
			assert.Equal(t, int64(1), c[metrics.BadRequest])
			assert.Equal(t, int64(1), c[metrics.Failure])
			for _, h := range []circuit.Health{g.Breaker().Snapshot().Health, commandBreaker(t, g, "GET").Snapshot().Health} {
				assert.Equal(t, int64(2), h.Requests, "the 4xx is not counted")
				assert.Equal(t, int64(1), h.Failures, "the 5xx is a failure")
			}
			tracker.requireClosedOnce(t)
		})
	}
}

func commandBreaker(t *testing.T, g *command.Group, name string) *circuit.Breaker {
	t.Helper()
	b, ok := g.CommandBreaker(name)
	require.True(t, ok)
	return b
}

// TestTransportDegradeServerErrors: with DegradeServerErrors, a 5xx is
// replaced by the degraded 503 and its body closed; it is still a failure.
func TestTransportDegradeServerErrors(t *testing.T) {
	var code atomic.Int32
	code.Store(500)
	srv := statusServer(t, &code)
	tr, tracker, reg := newTestTransport(t, Config{DegradeServerErrors: true,
		Group: command.GroupConfig{Strategy: command.Semaphore}}, nil)
	resp, err := get(t, tr, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "failure", resp.Header.Get("X-Degraded"))
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Equal(t, "bulwark: "+groupOf(t, reg, srv).Name()+": failure\n", readAll(t, resp))
	c := counts(t, groupOf(t, reg, srv), "GET")
	assert.Equal(t, int64(1), c[metrics.Failure])
	assert.Equal(t, int64(1), c[metrics.FallbackSuccess])
	assert.Len(t, tracker.closes(), 1)
	tracker.requireClosedOnce(t)

	tr, _, _ = newTestTransport(t, Config{DegradeServerErrors: true,
		Group: command.GroupConfig{Breaker: circuit.Config{Mode: circuit.ForcedOpen}}}, nil)
	_, err = get(t, tr, srv.URL)
	assert.ErrorIs(t, err, command.ErrRefused, "refusals are errors without Degrade")
}

// TestTransport429IsIgnored: a 429 counts neither as a failure nor as a
// success. 10 failures among 40 calls would be 25% if the 429s counted as
// successes; ignored, the breaker sees 10 failures out of 10 and opens.
func TestTransport429IsIgnored(t *testing.T) {
	var code atomic.Int32
	srv := statusServer(t, &code)
	tr, tracker, reg := newTestTransport(t, Config{Group: command.GroupConfig{Strategy: command.Semaphore,
		CommandBreaker: circuit.Config{MinRequests: 10, FailureRatio: 0.5}}}, nil)
	code.Store(429)
	for range 30 {
		resp, err := get(t, tr, srv.URL)
		require.NoError(t, err)
		require.Equal(t, 429, resp.StatusCode)
		require.NoError(t, resp.Body.Close())
	}
	br := commandBreaker(t, groupOf(t, reg, srv), "GET")
	assert.Zero(t, br.Snapshot().Health.Requests)
	code.Store(500)
	for range 10 {
		resp, err := get(t, tr, srv.URL)
		require.NoError(t, err)
		require.Equal(t, 500, resp.StatusCode)
		require.NoError(t, resp.Body.Close())
	}
	assert.Equal(t, circuit.Open, br.State())
	tracker.requireClosedOnce(t)
}

func TestTransportDegradedResponse(t *testing.T) {
	var code atomic.Int32
	code.Store(500)
	srv := statusServer(t, &code)
	clock := new(metrics.ManualClock)
	tr, tracker, reg := newTestTransport(t, Config{Degrade: true, Group: command.GroupConfig{Strategy: command.Semaphore,
		Breaker: circuit.Config{MinRequests: 5, OpenDuration: 5 * time.Second}}}, clock)
	for range 5 {
		resp, err := get(t, tr, srv.URL)
		require.NoError(t, err)
		require.Equal(t, 500, resp.StatusCode, "failures are passed through even with Degrade")
		require.NoError(t, resp.Body.Close())
	}
	g := groupOf(t, reg, srv)
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
	require.NoError(t, resp.Body.Close())

	c := counts(t, g, "POST")
	assert.Equal(t, int64(1), c[metrics.FallbackSuccess], "a degraded response is a fallback value")
	tracker.requireClosedOnce(t)
}

// TestTransportRetryAfterSaturates: an open time too long to round up in a
// time.Duration still gives a positive Retry-After.
func TestTransportRetryAfterSaturates(t *testing.T) {
	assert.Equal(t, int64(9223372037), retryAfterSeconds(math.MaxInt64))
	assert.Equal(t, int64(1), retryAfterSeconds(0))
	assert.Equal(t, int64(2), retryAfterSeconds(time.Second+1))
	assert.Equal(t, int64(1), retryAfterSeconds(time.Second))

	var code atomic.Int32
	code.Store(500)
	srv := statusServer(t, &code)
	tr, _, _ := newTestTransport(t, Config{Degrade: true, Group: command.GroupConfig{Strategy: command.Semaphore,
		Breaker: circuit.Config{MinRequests: 1, OpenDuration: math.MaxInt64}}}, nil)
	resp, err := get(t, tr, srv.URL)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	resp, err = get(t, tr, srv.URL)
	require.NoError(t, err)
	require.Equal(t, "short_circuited", resp.Header.Get("X-Degraded"))
	secs, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
	require.NoError(t, err)
	assert.Greater(t, secs, int64(9_000_000_000))
	require.NoError(t, resp.Body.Close())
}

type closeCounter struct {
	io.Reader
	closes int
}

func (c *closeCounter) Close() error { c.closes++; return nil }

func TestTransportShortCircuitError(t *testing.T) {
	var code atomic.Int32
	srv := statusServer(t, &code)
	tr, _, _ := newTestTransport(t, Config{Group: command.GroupConfig{Breaker: circuit.Config{Mode: circuit.ForcedOpen}}}, nil)
	resp, err := get(t, tr, srv.URL)
	assert.Nil(t, resp)
	assert.ErrorIs(t, err, command.ErrRefused)
	assert.ErrorIs(t, err, circuit.ErrOpen)
}

// holdServer answers at once, except a request to /hold, which it holds
// until the test lets it go (see whileHeld). It is closed with the test.
type holdServer struct {
	*httptest.Server
	entered, release chan struct{}
}

func newHoldServer(t *testing.T) *holdServer {
	h := &holdServer{entered: make(chan struct{}), release: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			close(h.entered)
			<-h.release
		}
	}))
	t.Cleanup(h.Close)
	return h
}

// whileHeld sends a request to /hold through tr and, once the server holds
// it, a GET of path; then it lets the held request finish and returns the
// answer to path.
func (h *holdServer) whileHeld(t *testing.T, tr http.RoundTripper, path string) (*http.Response, error) {
	var wg sync.WaitGroup
	wg.Go(func() {
		resp, err := get(t, tr, h.URL+"/hold")
		if assert.NoError(t, err) {
			resp.Body.Close()
		}
	})
	<-h.entered
	resp, err := get(t, tr, h.URL+path)
	close(h.release)
	wg.Wait()
	return resp, err
}

func TestTransportRejectedDegraded(t *testing.T) {
	tr, tracker, _ := newTestTransport(t, Config{Degrade: true,
		Group: command.GroupConfig{Strategy: command.Semaphore, MaxConcurrent: 1, Timeout: command.NoTimeout}}, nil)
	tracker.base.MaxConnsPerHost = 0 // two requests at once
	resp, err := newHoldServer(t).whileHeld(t, tr, "/")
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "semaphore_rejected", resp.Header.Get("X-Degraded"))
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	tracker.requireClosedOnce(t)
}

func TestTransportTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // hangs until the client gives up
	}))
	defer srv.Close()
	// A timeout long enough that the request starts (not a QUEUE_TIMEOUT)
	// on a loaded machine.
	tr, tracker, reg := newTestTransport(t, Config{Group: command.GroupConfig{Timeout: 500 * time.Millisecond}}, nil)
	resp, err := get(t, tr, srv.URL)
	assert.Nil(t, resp)
	assert.ErrorIs(t, err, command.ErrTimeout)
	g := groupOf(t, reg, srv)
	assert.Equal(t, int64(1), counts(t, g, "GET")[metrics.Timeout])
	// The detached worker ends once its request is cancelled.
	require.Eventually(t, func() bool { return g.Snapshot().Bulkhead.Active == 0 }, 5*time.Second, time.Millisecond)
	tracker.requireClosedOnce(t)
}

// TestTransportGroupPerHost: a failing host opens its own group's breaker;
// another host is unaffected.
func TestTransportGroupPerHost(t *testing.T) {
	var badCode, goodCode atomic.Int32
	badCode.Store(502)
	goodCode.Store(200)
	bad, good := statusServer(t, &badCode), statusServer(t, &goodCode)
	tr, tracker, reg := newTestTransport(t, Config{Group: command.GroupConfig{Strategy: command.Semaphore,
		Breaker: circuit.Config{MinRequests: 5}}}, nil)
	for range 5 {
		resp, err := get(t, tr, bad.URL)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	_, err := get(t, tr, bad.URL)
	assert.ErrorIs(t, err, command.ErrRefused)
	resp, err := get(t, tr, good.URL)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, circuit.Open, groupOf(t, reg, bad).Breaker().State())
	assert.Equal(t, circuit.Closed, groupOf(t, reg, good).Breaker().State())
	tracker.requireClosedOnce(t)
}

func TestTransportUsesExistingGroup(t *testing.T) {
	var code atomic.Int32
	code.Store(200)
	srv := statusServer(t, &code)
	tr, _, reg := newTestTransport(t, Config{}, nil)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	name, err := GroupName(u)
	require.NoError(t, err)
	own, err := reg.NewGroup(name, command.GroupConfig{Strategy: command.Semaphore, MaxConcurrent: 3})
	require.NoError(t, err)
	g, err := tr.Group(u)
	require.NoError(t, err)
	assert.Same(t, own, g)
}

// TestTransportClosedGroupGetsFreshGroup: closing a host's group does not
// leave the host failing with "closed": its next request gets a new group.
func TestTransportClosedGroupGetsFreshGroup(t *testing.T) {
	var code atomic.Int32
	code.Store(200)
	srv := statusServer(t, &code)
	for _, s := range []command.Strategy{command.Thread, command.Semaphore} {
		t.Run(s.String(), func(t *testing.T) {
			tr, tracker, reg := newTestTransport(t, Config{Group: command.GroupConfig{Strategy: s}}, nil)
			resp, err := get(t, tr, srv.URL)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			old := groupOf(t, reg, srv)
			require.NoError(t, old.Close(context.Background()))

			resp, err = get(t, tr, srv.URL)
			require.NoError(t, err, "the host gets a new group")
			assert.Equal(t, "body of OK", readAll(t, resp))
			fresh := groupOf(t, reg, srv)
			assert.NotSame(t, old, fresh)
			assert.Equal(t, int64(1), counts(t, fresh, "GET")[metrics.Success])
			tracker.requireClosedOnce(t)
		})
	}
}

// TestTransportRegistryClosed: once the registry is closed, a request gets
// an error matching command.ErrClosed, and no group is created.
func TestTransportRegistryClosed(t *testing.T) {
	var code atomic.Int32
	code.Store(200)
	srv := statusServer(t, &code)
	tr, _, reg := newTestTransport(t, Config{}, nil)
	resp, err := get(t, tr, srv.URL)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, reg.Close(context.Background()))

	reqBody := &closeCounter{Reader: strings.NewReader("payload")}
	req, err := http.NewRequest(http.MethodPost, srv.URL, reqBody)
	require.NoError(t, err)
	resp, err = tr.RoundTrip(req)
	assert.Nil(t, resp)
	assert.ErrorIs(t, err, command.ErrClosed)
	assert.Equal(t, 1, reqBody.closes, "the unsent request body is closed")
	assert.Empty(t, reg.Snapshot().Groups)
}

func TestGroupName(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"http://example.com/x", "example.com:80"},
		{"https://API.Example.COM./x", "api.example.com:443"},
		{"HTTPS://api.example.com:443", "api.example.com:443"},
		{"http://api.example.com:8080", "api.example.com:8080"},
		{"http://[::1]:8080/", "[::1]:8080"},
		{"http://[::1]/", "[::1]:80"},
		{"http://127.0.0.1", "127.0.0.1:80"},
		{"ws://chat.example.com/", "chat.example.com"},
	} {
		u, err := url.Parse(tc.url)
		require.NoError(t, err)
		got, err := GroupName(u)
		require.NoError(t, err, tc.url)
		assert.Equal(t, tc.want, got, tc.url)
	}
	_, err := GroupName(&url.URL{Scheme: "http", Path: "/x"})
	assert.ErrorContains(t, err, "no host")
}

// TestTransportHostSpellings: one backend spelled several ways is one
// group.
func TestTransportHostSpellings(t *testing.T) {
	tr, _, reg := newTestTransport(t, Config{MaxHosts: 1}, nil)
	var first *command.Group
	for _, raw := range []string{"http://localhost/a", "http://LocalHost./b", "http://localhost:80/c"} {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		g, err := tr.Group(u)
		require.NoError(t, err, raw)
		if first == nil {
			first = g
		}
		assert.Same(t, first, g, raw)
	}
	assert.Len(t, reg.Snapshot().Groups, 1)
	assert.Equal(t, "localhost:80", first.Name())
}

// TestTransportMaxHosts: beyond MaxHosts open groups, a new host gets an
// error matching ErrTooManyHosts and one log record; a host whose group
// was closed frees its place; groups created by the user do not count.
func TestTransportMaxHosts(t *testing.T) {
	var logs bytes.Buffer
	reg := newTestRegistry(t, nil)
	tr, err := NewTransport(reg, Config{MaxHosts: 2, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	group := func(host string) (*command.Group, error) { return tr.Group(&url.URL{Scheme: "http", Host: host}) }

	_, err = reg.NewGroup("own.example:80", command.GroupConfig{})
	require.NoError(t, err)
	a, err := group("a.example")
	require.NoError(t, err)
	_, err = group("b.example")
	require.NoError(t, err)
	_, err = group("own.example")
	require.NoError(t, err, "a group the user created does not count")
	for range 2 {
		_, err = group("c.example")
		assert.ErrorIs(t, err, ErrTooManyHosts)
		assert.ErrorContains(t, err, "c.example:80")
	}
	_, err = group("A.example.")
	assert.NoError(t, err, "a host already served is not refused")
	assert.Equal(t, 1, strings.Count(logs.String(), "host limit reached"), "logged once")

	require.NoError(t, a.Close(context.Background()))
	_, err = group("c.example")
	assert.NoError(t, err, "a closed group frees its place")
	_, err = group("a.example")
	assert.ErrorIs(t, err, ErrTooManyHosts, "a.example's place was taken")
}

func TestTransportInvalidConfig(t *testing.T) {
	reg := newTestRegistry(t, nil)
	_, err := NewTransport(reg, Config{Group: command.GroupConfig{MaxConcurrent: -1}})
	assert.ErrorIs(t, err, command.ErrInvalidConfig)
	assert.ErrorContains(t, err, "MaxConcurrent -1")
	_, err = NewTransport(reg, Config{MaxHosts: -1})
	assert.ErrorIs(t, err, command.ErrInvalidConfig)
	assert.ErrorContains(t, err, "MaxHosts -1")
	_, err = NewTransport(nil, Config{})
	assert.ErrorIs(t, err, command.ErrInvalidConfig)
}

func TestTransportWithHTTPClient(t *testing.T) {
	var code atomic.Int32
	code.Store(500)
	srv := statusServer(t, &code)
	tr, tracker, _ := newTestTransport(t, Config{}, nil)
	client := &http.Client{Transport: tr}
	resp, err := client.Get(srv.URL)
	require.NoError(t, err)
	assert.Equal(t, 500, resp.StatusCode)
	assert.Equal(t, "body of Internal Server Error", readAll(t, resp))
	tracker.requireClosedOnce(t)
}

// TestTransportQueueTimeoutDegraded: a request that timed out in the
// group's queue never left: with Degrade it gets the degraded 503.
func TestTransportQueueTimeoutDegraded(t *testing.T) {
	tr, tracker, reg := newTestTransport(t, Config{Degrade: true,
		CommandName: func(r *http.Request) string { return r.URL.Path },
		Group: command.GroupConfig{MaxConcurrent: 1, QueueSize: 1, Timeout: 50 * time.Millisecond,
			Commands: map[string]command.CommandConfig{"/hold": {Timeout: command.NoTimeout}}}}, nil)
	tracker.base.MaxConnsPerHost = 0 // two requests at once
	srv := newHoldServer(t)
	resp, err := srv.whileHeld(t, tr, "/queued")
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "queue_timeout", resp.Header.Get("X-Degraded"))
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, int64(1), counts(t, groupOf(t, reg, srv.Server), "/queued")[metrics.QueueTimeout])
	tracker.requireClosedOnce(t)
}
