package faultinject

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testBody = "0123456789abcdefghijklmnopqrstuvwxyz"

// newTestServer serves testBody and counts the requests it got.
func newTestServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	hits := new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, testBody)
	}))
	t.Cleanup(srv.Close)
	return srv, hits
}

// newTestClient returns a client whose transport injects the faults of f
// into requests to a fresh http.Transport, closed with the test.
func newTestClient(t *testing.T, f *Faults) *http.Client {
	t.Helper()
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	return &http.Client{Transport: NewTransport(base, f)}
}

// closeCounter is a request body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed atomic.Int64
}

func (c *closeCounter) Close() error {
	c.closed.Add(1)
	return nil
}

func TestTransportInjectedFailuresNeverReachTheServer(t *testing.T) {
	srv, hits := newTestServer(t)
	for _, tc := range []struct {
		name  string
		cfg   Config
		cause error
	}{
		{"error", Config{ErrorShare: 1}, nil},
		{"reset", Config{ResetShare: 1}, syscall.ECONNRESET},
		{"eof", Config{EOFShare: 1}, io.ErrUnexpectedEOF},
		{"dns", Config{DNSShare: 1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := newTestClient(t, newEnabled(t, tc.cfg))
			body := &closeCounter{Reader: strings.NewReader("payload")}
			resp, err := client.Post(srv.URL, "text/plain", body)
			if resp != nil {
				resp.Body.Close()
			}
			require.ErrorIs(t, err, ErrInjected)
			var fe *Error
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, Fault(tc.name), fe.Fault)
			if tc.cause != nil {
				assert.ErrorIs(t, err, tc.cause)
			}
			assert.Equal(t, int64(1), body.closed.Load(), "the request body is closed")
		})
	}
	assert.Zero(t, hits.Load())
}

func TestTransportServerError(t *testing.T) {
	srv, hits := newTestServer(t)
	for _, tc := range []struct{ code, want int }{{0, http.StatusServiceUnavailable}, {502, 502}} {
		client := newTestClient(t, newEnabled(t, Config{ServerErrorShare: 1, StatusCode: tc.code}))
		resp, err := client.Get(srv.URL)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, tc.want, resp.StatusCode)
		assert.Equal(t, "server_error", resp.Header.Get(HeaderInjected))
		assert.Contains(t, string(b), "injected")
		assert.Equal(t, int64(len(b)), resp.ContentLength)
	}
	assert.Zero(t, hits.Load())
}

func TestTransportHangHonoursTheContext(t *testing.T) {
	srv, hits := newTestServer(t)
	client := newTestClient(t, newEnabled(t, Config{HangShare: 1}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		resp, err := client.Do(req)
		if resp != nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(10 * time.Second):
		t.Fatal("the hang outlived its context")
	}
	assert.Zero(t, hits.Load())
}

func TestTransportLatencyThenPassesThrough(t *testing.T) {
	srv, hits := newTestServer(t)
	client := newTestClient(t, newEnabled(t, Config{LatencyShare: 1, Latency: Fixed(20 * time.Millisecond)}))
	start := time.Now()
	resp, err := client.Get(srv.URL)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, testBody, string(b))
	assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
	assert.Equal(t, int64(1), hits.Load())

	client = newTestClient(t, newEnabled(t, Config{LatencyShare: 1, Latency: Fixed(time.Hour)}))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	body := &closeCounter{Reader: strings.NewReader("payload")}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, body)
	require.NoError(t, err)
	resp, err = client.Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int64(1), body.closed.Load())
	assert.Equal(t, int64(1), hits.Load())
}

func TestTransportSlowBody(t *testing.T) {
	srv, _ := newTestServer(t)
	client := newTestClient(t, newEnabled(t, Config{SlowBodyShare: 1, SlowBodyChunk: 4, SlowBodyDelay: 2 * time.Millisecond}))

	resp, err := client.Get(srv.URL)
	require.NoError(t, err)
	start := time.Now()
	var reads int
	var got []byte
	buf := make([]byte, 1024)
	for {
		n, err := resp.Body.Read(buf)
		assert.LessOrEqual(t, n, 4)
		got = append(got, buf[:n]...)
		reads++
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
	}
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, testBody, string(got))
	assert.GreaterOrEqual(t, reads, len(testBody)/4)
	assert.GreaterOrEqual(t, time.Since(start), time.Duration(len(testBody)/4)*2*time.Millisecond)

	// The pause ends when the request's context does.
	client = newTestClient(t, newEnabled(t, Config{SlowBodyShare: 1, SlowBodyDelay: time.Hour}))
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err = client.Do(req)
	require.NoError(t, err)
	time.AfterFunc(10*time.Millisecond, cancel)
	_, err = io.ReadAll(resp.Body)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, resp.Body.Close())
}

// stubTransport answers every request with a body that counts its Close
// calls.
type stubTransport struct{ body *closeCounter }

func (s stubTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: s.body, Request: req}, nil
}

func TestTransportSlowBodyClosesTheServersBody(t *testing.T) {
	body := &closeCounter{Reader: strings.NewReader(testBody)}
	rt := NewTransport(stubTransport{body}, newEnabled(t, Config{SlowBodyShare: 1, SlowBodyDelay: time.Millisecond}))
	req := httptest.NewRequest(http.MethodGet, "http://example.test/", nil)
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	_, slow := resp.Body.(*slowBody)
	require.True(t, slow)
	n, err := resp.Body.Read(make([]byte, 10))
	require.NoError(t, err)
	assert.Equal(t, 1, n, "SlowBodyChunk zero means 1 byte per Read")
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, int64(1), body.closed.Load())
}

func TestTransportRuntimeSwitchAppliesToTheNextRequest(t *testing.T) {
	srv, hits := newTestServer(t)
	f, err := New(Config{ServerErrorShare: 1})
	require.NoError(t, err)
	client := newTestClient(t, f)
	status := func() int {
		resp, err := client.Get(srv.URL)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, status())
	f.Enable()
	assert.Equal(t, http.StatusServiceUnavailable, status())
	require.NoError(t, f.Set(Config{ServerErrorShare: 1, StatusCode: 500}))
	assert.Equal(t, http.StatusInternalServerError, status())
	f.Disable()
	assert.Equal(t, http.StatusOK, status())
	assert.Equal(t, int64(2), hits.Load())

	// A nil Faults, and a nil next RoundTripper (http.DefaultTransport).
	assert.Same(t, http.DefaultTransport, NewTransport(nil, nil).next)
	resp, err := (&http.Client{Transport: NewTransport(srv.Client().Transport, nil)}).Get(srv.URL)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestTransportSharesWithinStatisticalBounds(t *testing.T) {
	const n = 10_000
	body := &closeCounter{Reader: strings.NewReader("")}
	rt := NewTransport(stubTransport{body}, newEnabled(t, Config{Seed: 11, ResetShare: 0.3, ServerErrorShare: 0.2}))
	var resets, serverErrors, passed int
	for range n {
		resp, err := rt.RoundTrip(httptest.NewRequest(http.MethodGet, "http://example.test/", nil))
		switch {
		case errors.Is(err, syscall.ECONNRESET):
			resets++
		case err != nil:
			t.Fatal(err)
		case resp.StatusCode == http.StatusServiceUnavailable:
			serverErrors++
		default:
			passed++
		}
	}
	assert.InDelta(t, 0.3, float64(resets)/n, 0.03)
	assert.InDelta(t, 0.2, float64(serverErrors)/n, 0.03)
	assert.InDelta(t, 0.5, float64(passed)/n, 0.03)
}
