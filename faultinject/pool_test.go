package faultinject

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTransportExhaustedPoolLooksLikeARealOne compares a request that waits
// in the imitated pool with one that waits for a real http.Transport whose
// only connection is held by a request the server does not answer: both
// end when their context does, with the same error and the same text.
func TestTransportExhaustedPoolLooksLikeARealOne(t *testing.T) {
	release, arrived := make(chan struct{}), make(chan struct{}, 1)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/hold" {
			arrived <- struct{}{}
			<-release
		}
	}))
	real := &http.Transport{MaxConnsPerHost: 1}
	held := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Transport: real}).Get(srv.URL + "/hold")
		if err == nil {
			_ = resp.Body.Close()
		}
		held <- err
	}()
	t.Cleanup(func() {
		close(release)
		assert.NoError(t, <-held)
		real.CloseIdleConnections()
		srv.Close()
	})
	<-arrived

	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	injected := NewTransport(base, newEnabled(t, Config{PoolSize: 1, PoolHeld: 1}))

	cause := errors.New("the drill's caller gave up")
	for _, tc := range []struct {
		name string
		do   func(rt http.RoundTripper) error
		is   error
	}{
		{"context deadline", func(rt http.RoundTripper) error {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel()
			return get(ctx, &http.Client{Transport: rt}, srv.URL)
		}, context.DeadlineExceeded},
		{"context cause", func(rt http.RoundTripper) error {
			ctx, cancel := context.WithTimeoutCause(context.Background(), 30*time.Millisecond, cause)
			defer cancel()
			return get(ctx, &http.Client{Transport: rt}, srv.URL)
		}, cause},
		{"client timeout", func(rt http.RoundTripper) error {
			return get(context.Background(), &http.Client{Transport: rt, Timeout: 30 * time.Millisecond}, srv.URL)
		}, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			realErr := tc.do(real)
			err := tc.do(injected)
			require.ErrorIs(t, realErr, tc.is)
			require.ErrorIs(t, err, tc.is)
			// net/http adds " (Client.Timeout exceeded while awaiting
			// headers)" when its own timer marked the timeout before the
			// transport returned: a race between two events at the same
			// instant, which either transport may win on a given run.
			racy := strings.NewReplacer(" (Client.Timeout exceeded while awaiting headers)", "")
			assert.Equal(t, racy.Replace(realErr.Error()), racy.Replace(err.Error()))
			assert.NotErrorIs(t, err, ErrInjected, "a real pool's wait has no injected error either")
		})
	}
	assert.Equal(t, int64(1), hits.Load(), "only the held request reached the server")
}

// get sends a GET to target and closes the response; it returns the error.
func get(ctx context.Context, c *http.Client, target string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// bodyServer answers every request at once with testBody.
type bodyServer struct{}

func (bodyServer) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(testBody)), Request: req}, nil
}

// poolRig is a Transport imitating a pool over a bodyServer.
type poolRig struct {
	t      *testing.T
	faults *Faults
	rt     *Transport
}

func newPoolRig(t *testing.T, cfg Config) *poolRig {
	f := newEnabled(t, cfg)
	return &poolRig{t: t, faults: f, rt: NewTransport(bodyServer{}, f)}
}

// send starts a request to target and returns the channel its response
// (or error) arrives on.
func (r *poolRig) send(ctx context.Context, target string) <-chan result {
	out := make(chan result, 1)
	go func() {
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		resp, err := r.rt.RoundTrip(req)
		out <- result{resp, err}
	}()
	return out
}

// waiting returns how many requests to target wait for a connection.
func (r *poolRig) waiting(target string) int {
	p := r.rt.pools.of(httptest.NewRequest(http.MethodGet, target, nil))
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiting.Len()
}

// queue starts a request to target and returns once it waits in the pool.
func (r *poolRig) queue(ctx context.Context, target string) <-chan result {
	before := r.waiting(target)
	out := r.send(ctx, target)
	require.Eventually(r.t, func() bool { return r.waiting(target) == before+1 }, 10*time.Second, time.Millisecond)
	return out
}

type result struct {
	resp *http.Response
	err  error
}

// answered returns the response of out, failing the test if it does not come.
func answered(t *testing.T, out <-chan result) *http.Response {
	t.Helper()
	select {
	case r := <-out:
		require.NoError(t, r.err)
		return r.resp
	case <-time.After(10 * time.Second):
		t.Fatal("the request never got a connection")
		return nil
	}
}

// stillWaiting fails the test if out has an answer.
func stillWaiting(t *testing.T, out <-chan result) {
	t.Helper()
	select {
	case r := <-out:
		t.Fatalf("the request went on without a free connection: %v", r.err)
	default:
	}
}

func TestTransportPoolHeldLeavesTheRestFree(t *testing.T) {
	const a = "http://a.test/"
	r := newPoolRig(t, Config{PoolSize: 3, PoolHeld: 1})
	first := answered(t, r.send(context.Background(), a))
	second := answered(t, r.send(context.Background(), a))
	third := r.queue(context.Background(), a)
	fourth := r.queue(context.Background(), a)

	// Another host's pool is its own.
	require.NoError(t, answered(t, r.send(context.Background(), "http://b.test/")).Body.Close())

	// Reading a body to its end frees its connection, for the oldest waiter.
	_, err := io.ReadAll(first.Body)
	require.NoError(t, err)
	got := answered(t, third)
	stillWaiting(t, fourth)
	require.NoError(t, first.Body.Close(), "closing after EOF frees nothing twice")
	stillWaiting(t, fourth)

	// Closing one frees it too.
	require.NoError(t, second.Body.Close())
	require.NoError(t, answered(t, fourth).Body.Close())
	require.NoError(t, got.Body.Close())
	assert.Zero(t, r.waiting(a))
}

func TestTransportPoolWaiterThatGivesUpLeavesTheQueue(t *testing.T) {
	const a = "http://a.test/"
	r := newPoolRig(t, Config{PoolSize: 2, PoolHeld: 1})
	holder := answered(t, r.send(context.Background(), a))
	ctx, cancel := context.WithCancel(context.Background())
	quitter := r.queue(ctx, a)
	patient := r.queue(context.Background(), a)
	cancel()
	select {
	case res := <-quitter:
		require.ErrorIs(t, res.err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter outlived its context")
	}
	assert.Equal(t, 1, r.waiting(a))
	require.NoError(t, holder.Body.Close())
	require.NoError(t, answered(t, patient).Body.Close())
}

func TestTransportPoolFreedByDisableAndSet(t *testing.T) {
	const a = "http://a.test/"
	r := newPoolRig(t, Config{PoolSize: 2, PoolHeld: 2})
	first, second := r.queue(context.Background(), a), r.queue(context.Background(), a)

	// A Set that holds one connection fewer lets the oldest waiter go on.
	require.NoError(t, r.faults.Set(Config{PoolSize: 2, PoolHeld: 1}))
	resp := answered(t, first)
	stillWaiting(t, second)

	// Disable frees every connection.
	r.faults.Disable()
	require.NoError(t, answered(t, second).Body.Close())
	require.NoError(t, resp.Body.Close())
	require.NoError(t, answered(t, r.send(context.Background(), a)).Body.Close())

	// Enabled again, the pool is imitated again.
	r.faults.Enable()
	held := answered(t, r.send(context.Background(), a))
	waiter := r.queue(context.Background(), a)
	require.NoError(t, held.Body.Close())
	require.NoError(t, answered(t, waiter).Body.Close())
}

func TestTransportPoolFreesTheConnectionOfAFailedRequest(t *testing.T) {
	const a = "http://a.test/"
	r := newPoolRig(t, Config{PoolSize: 1, ErrorShare: 1})
	_, err := r.rt.RoundTrip(httptest.NewRequest(http.MethodGet, a, nil))
	require.ErrorIs(t, err, ErrInjected, "PoolHeld zero imitates no pool")

	require.NoError(t, r.faults.Set(Config{PoolSize: 2, PoolHeld: 1, ErrorShare: 1}))
	for range 3 {
		_, err := r.rt.RoundTrip(httptest.NewRequest(http.MethodGet, a, nil))
		require.ErrorIs(t, err, ErrInjected, "each failed request freed its connection for the next")
	}
	require.NoError(t, r.faults.Set(Config{PoolSize: 2, PoolHeld: 1, ServerErrorShare: 1}))
	resp, err := r.rt.RoundTrip(httptest.NewRequest(http.MethodGet, a, nil))
	require.NoError(t, err)
	waiter := r.queue(context.Background(), a)
	require.NoError(t, resp.Body.Close(), "an injected response holds its connection until closed")
	require.NoError(t, answered(t, waiter).Body.Close())
}
