package httpguard

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/priority"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/ratelimit"
)

// serve starts a real server on loopback whose mux routes pattern to h
// behind s's middleware; it is closed with the test.
func serve(t *testing.T, s *Server, pattern string, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(pattern, s.Middleware(h))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the panics net/http logs
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// fetchURL sends a GET to url with the headers hdr (name, value, ...) and
// returns the status, the Retry-After header and the body.
func fetchURL(t *testing.T, url string, hdr ...string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(body)
}

// routeCounts returns the window counts of the route's group.
func routeCounts(t *testing.T, s *Server, route string) metrics.Counts {
	t.Helper()
	g, err := s.Group(route)
	require.NoError(t, err)
	return g.Snapshot().Metrics.Counts
}

// blocker is a handler that holds its requests until released.
type blocker struct {
	started chan struct{}
	release chan struct{}
}

func newBlocker() *blocker {
	return &blocker{started: make(chan struct{}, 16), release: make(chan struct{})}
}

func (b *blocker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("hold") != "" {
		b.started <- struct{}{}
		<-b.release
	}
	fmt.Fprint(w, "ok")
}

// holdRequests sends n requests that the blocker holds, and returns once
// the handler has them all; wait waits for their answers.
func (b *blocker) holdRequests(t *testing.T, url string, n int, hdr ...string) (wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			code, _, _ := fetchURL(t, url+"?hold=1", hdr...)
			assert.Equal(t, http.StatusOK, code)
		})
		select {
		case <-b.started:
		case <-time.After(10 * time.Second):
			t.Fatal("a held request never reached the handler")
		}
	}
	return wg.Wait
}

func TestMiddlewareBulkheadAnswers503WithRetryAfter(t *testing.T) {
	s, err := NewServer(newTestRegistry(t, nil), ServerConfig{Group: command.GroupConfig{MaxConcurrent: 1}, RetryAfter: 3 * time.Second})
	require.NoError(t, err)
	b := newBlocker()
	srv := serve(t, s, "GET /items", b.ServeHTTP)
	wait := b.holdRequests(t, srv.URL+"/items", 1)

	code, retry, body := fetchURL(t, srv.URL+"/items")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "3", retry)
	assert.Contains(t, body, "semaphore_rejected")
	close(b.release)
	wait()
	code, _, body = fetchURL(t, srv.URL+"/items")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok", body)

	c := routeCounts(t, s, "GET /items")
	assert.EqualValues(t, 2, c[metrics.Success])
	assert.EqualValues(t, 1, c[metrics.SemaphoreRejected])
	g, _ := s.Group("GET /items")
	assert.Equal(t, "http GET /items", g.Name(), "a group per route, named by its pattern")
}

func TestMiddlewareRateLimitPerCaller(t *testing.T) {
	clock := new(metrics.ManualClock)
	perKey, err := ratelimit.NewPerKey(ratelimit.PerKeyConfig{New: func(string) (ratelimit.Limiter, error) {
		return ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 0.5, Burst: 1, Clock: clock})
	}})
	require.NoError(t, err)
	s, err := NewServer(newTestRegistry(t, clock), ServerConfig{Group: command.GroupConfig{KeyedRateLimit: perKey},
		Key: func(r *http.Request) string { return r.Header.Get("X-Client") }})
	require.NoError(t, err)
	srv := serve(t, s, "GET /items", newBlocker().ServeHTTP)

	code, _, _ := fetchURL(t, srv.URL+"/items", "X-Client", "a")
	assert.Equal(t, http.StatusOK, code)
	code, retry, body := fetchURL(t, srv.URL+"/items", "X-Client", "a")
	assert.Equal(t, http.StatusTooManyRequests, code)
	assert.Equal(t, "2", retry, "the token bucket's own delay: one token per 2 s")
	assert.Contains(t, body, "rate_limited")
	code, _, _ = fetchURL(t, srv.URL+"/items", "X-Client", "b")
	assert.Equal(t, http.StatusOK, code, "another caller has its own quota")

	_, err = NewServer(newTestRegistry(t, nil), ServerConfig{Group: command.GroupConfig{KeyedRateLimit: perKey}})
	assert.ErrorIs(t, err, command.ErrInvalidConfig)
	assert.ErrorContains(t, err, "ServerConfig.Key is nil")
}

func TestMiddlewarePriorityShedsLowerFirst(t *testing.T) {
	s, err := NewServer(newTestRegistry(t, nil), ServerConfig{
		Group:    command.GroupConfig{MaxConcurrent: 2, Priority: priority.Config{Reserve: [4]float64{0, 0.1, 0.25, 0.5}}},
		Priority: PriorityHeader("X-Priority", priority.P3),
	})
	require.NoError(t, err)
	b := newBlocker()
	srv := serve(t, s, "GET /items", b.ServeHTTP)
	wait := b.holdRequests(t, srv.URL+"/items", 1, "X-Priority", "P0")

	code, retry, body := fetchURL(t, srv.URL+"/items", "X-Priority", "P3")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "1", retry, "the default RetryAfter")
	assert.Contains(t, body, "priority_rejected")
	code, _, _ = fetchURL(t, srv.URL+"/items")
	assert.Equal(t, http.StatusServiceUnavailable, code, "no header: P3 (PriorityHeader's missing)")
	code, _, _ = fetchURL(t, srv.URL+"/items", "X-Priority", "1")
	assert.Equal(t, http.StatusServiceUnavailable, code, "P1 enters below 2 - ceil(2 × 0.1) = 1: shed too")
	code, _, _ = fetchURL(t, srv.URL+"/items", "X-Priority", "0")
	assert.Equal(t, http.StatusOK, code, "P0 takes the last slot")
	close(b.release)
	wait()
	c := routeCounts(t, s, "GET /items")
	assert.EqualValues(t, 3, c[metrics.PriorityRejected])
	assert.EqualValues(t, 2, c[metrics.Success])
}

func TestPriorityHeader(t *testing.T) {
	f := PriorityHeader("X-Priority", priority.P2)
	for v, want := range map[string]priority.Level{"0": priority.P0, "P1": priority.P1, "p3": priority.P3, "": priority.P2, "4": priority.P2, "x": priority.P2} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Priority", v)
		assert.Equal(t, want, f(r), "%q", v)
	}
}

// TestMiddlewareStreamsServerSentEvents: an SSE handler behind the
// middleware flushes each event to the client as it writes it, through
// http.Flusher and http.ResponseController alike.
func TestMiddlewareStreamsServerSentEvents(t *testing.T) {
	s, err := NewServer(newTestRegistry(t, nil), ServerConfig{})
	require.NoError(t, err)
	next := make(chan struct{})
	srv := serve(t, s, "GET /events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		require.NoError(t, rc.SetWriteDeadline(time.Now().Add(time.Minute)), "ResponseController reaches the server's writer")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			if i%2 == 0 {
				w.(http.Flusher).Flush()
			} else {
				require.NoError(t, rc.Flush())
			}
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
		}
	})
	resp, err := http.Get(srv.URL + "/events")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	rd := bufio.NewReader(resp.Body)
	for i := range 3 {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("data: %d\n", i), line, "event %d arrives while the handler still runs", i)
		_, err = rd.ReadString('\n')
		require.NoError(t, err)
		next <- struct{}{}
	}
	_, err = io.ReadAll(rd)
	require.NoError(t, err)
	assert.EqualValues(t, 1, routeCounts(t, s, "GET /events")[metrics.Success])
}

func TestMiddlewarePassesHijack(t *testing.T) {
	s, err := NewServer(newTestRegistry(t, nil), ServerConfig{})
	require.NoError(t, err)
	srv := serve(t, s, "GET /raw", func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if !assert.NoError(t, err) {
			return
		}
		defer conn.Close()
		fmt.Fprint(buf, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nraw ok")
		assert.NoError(t, buf.Flush())
	})
	code, _, body := fetchURL(t, srv.URL+"/raw")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "raw ok", body)
	// The client has the whole answer before the handler returns (its
	// deferred Close), and the call is counted when it returns.
	require.Eventually(t, func() bool { return routeCounts(t, s, "GET /raw")[metrics.Success] == 1 },
		10*time.Second, time.Millisecond)
}

// TestMiddlewarePanics: a handler's panic is a FAILURE and reaches
// net/http, which drops the connection, unless Recover is set (a 500);
// http.ErrAbortHandler goes on up whatever Recover says.
func TestMiddlewarePanics(t *testing.T) {
	for _, recovering := range []bool{false, true} {
		t.Run(fmt.Sprint("recover=", recovering), func(t *testing.T) {
			s, err := NewServer(newTestRegistry(t, nil), ServerConfig{Recover: recovering})
			require.NoError(t, err)
			var panicked atomic.Bool
			srv := serve(t, s, "GET /", func(w http.ResponseWriter, r *http.Request) {
				defer func() {
					if v := recover(); v != nil {
						panicked.Store(true)
						panic(v)
					}
				}()
				if r.URL.Query().Get("abort") != "" {
					panic(http.ErrAbortHandler)
				}
				panic("boom")
			})
			resp, err := http.Get(srv.URL + "/")
			if recovering {
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
			} else {
				assert.Error(t, err, "net/http drops the connection of a panicking handler")
			}
			_, err = http.Get(srv.URL + "/?abort=1")
			assert.Error(t, err, "ErrAbortHandler aborts the response")
			assert.True(t, panicked.Load())
			assert.EqualValues(t, 2, routeCounts(t, s, "GET /")[metrics.Failure], "each panic is counted")
		})
	}
}

func TestMiddleware5xxIsAFailure(t *testing.T) {
	s, err := NewServer(newTestRegistry(t, nil), ServerConfig{})
	require.NoError(t, err)
	srv := serve(t, s, "GET /", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "db down", http.StatusBadGateway)
	})
	code, _, body := fetchURL(t, srv.URL+"/")
	assert.Equal(t, http.StatusBadGateway, code, "the handler's own answer")
	assert.Equal(t, "db down\n", body)
	assert.EqualValues(t, 1, routeCounts(t, s, "GET /")[metrics.Failure])
}

// TestMiddlewareDeadline: the handler's context carries the request's
// deadline, cut to Group.Timeout; a handler that outlives it is a TIMEOUT
// answered 503 when it wrote nothing.
func TestMiddlewareDeadline(t *testing.T) {
	s, err := NewServer(newTestRegistry(t, nil), ServerConfig{Group: command.GroupConfig{Timeout: 50 * time.Millisecond}})
	require.NoError(t, err)
	srv := serve(t, s, "GET /", func(w http.ResponseWriter, r *http.Request) {
		dl, ok := r.Context().Deadline()
		assert.True(t, ok)
		assert.WithinDuration(t, time.Now(), dl, 50*time.Millisecond)
		<-r.Context().Done()
	})
	code, _, body := fetchURL(t, srv.URL+"/")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "timeout")
	assert.EqualValues(t, 1, routeCounts(t, s, "GET /")[metrics.Timeout])

	// Without a Timeout, the handler has the request's own context.
	s, err = NewServer(newTestRegistry(t, nil), ServerConfig{})
	require.NoError(t, err)
	srv = serve(t, s, "GET /", func(w http.ResponseWriter, r *http.Request) {
		_, ok := r.Context().Deadline()
		assert.False(t, ok, "no deadline added")
		fmt.Fprint(w, "ok")
	})
	code, _, _ = fetchURL(t, srv.URL+"/")
	assert.Equal(t, http.StatusOK, code)
}

// TestMiddlewareConservation: concurrent requests that succeed, fail,
// panic (recovered), time out, are shed or rejected: each ends in exactly
// one primary outcome in its route's group, and the clients saw as many
// answers of each kind.
func TestMiddlewareConservation(t *testing.T) {
	closed := circuit.Config{Mode: circuit.ForcedClosed} // every request reaches the bulkhead
	s, err := NewServer(newTestRegistry(t, nil), ServerConfig{Recover: true, Priority: PriorityHeader("X-Priority", priority.P0),
		Group: command.GroupConfig{MaxConcurrent: 4, Timeout: 10 * time.Millisecond, Priority: priority.Config{Reserve: [4]float64{0, 0.1, 0.25, 0.5}},
			Breaker: closed, CommandBreaker: closed}})
	require.NoError(t, err)
	srv := serve(t, s, "GET /", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("do") {
		case "fail":
			w.WriteHeader(http.StatusInternalServerError)
		case "panic":
			panic("boom")
		case "slow":
			<-r.Context().Done() // a TIMEOUT that writes nothing: answered 503
			return
		}
		fmt.Fprint(w, "ok")
	})
	const requests = 400
	var mu sync.Mutex
	seen := map[int]int{}
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			do := [...]string{"ok", "fail", "panic", "slow"}[i%4]
			code, _, _ := fetchURL(t, srv.URL+"/?do="+do, "X-Priority", fmt.Sprint(i%4))
			mu.Lock()
			seen[code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	c := routeCounts(t, s, "GET /")
	assert.EqualValues(t, requests, c.Calls(), "one primary outcome per request: %v", c)
	assert.Equal(t, requests, seen[http.StatusOK]+seen[http.StatusInternalServerError]+seen[http.StatusServiceUnavailable], "%v", seen)
	// A handler that answered after its deadline (on a loaded machine) is
	// a TIMEOUT whose client got the handler's own answer; the slow ones
	// wrote nothing and got a 503.
	refused := c[metrics.SemaphoreRejected] + c[metrics.PriorityRejected] + c[metrics.QueueTimeout] + c[metrics.ShortCircuited]
	assert.GreaterOrEqual(t, int64(seen[http.StatusServiceUnavailable]), refused)
	assert.LessOrEqual(t, int64(seen[http.StatusServiceUnavailable]), refused+c[metrics.Timeout])
	assert.GreaterOrEqual(t, int64(seen[http.StatusOK]), c[metrics.Success])
	assert.GreaterOrEqual(t, int64(seen[http.StatusInternalServerError]), c[metrics.Failure])
	for _, e := range []metrics.Event{metrics.Success, metrics.Failure, metrics.Timeout, metrics.PriorityRejected} {
		assert.Positive(t, c[e], "the test reaches %v", e)
	}
	t.Logf("answers %v, counts %v", seen, c)
}

func TestNewServerValidation(t *testing.T) {
	reg := newTestRegistry(t, nil)
	for _, tc := range []struct {
		cfg  ServerConfig
		want string
	}{
		{ServerConfig{Group: command.GroupConfig{QueueSize: 3}}, "ServerConfig.Group.QueueSize 3 must be 0"},
		{ServerConfig{RetryAfter: -time.Second}, "ServerConfig.RetryAfter -1s must not be negative"},
		{ServerConfig{MaxRoutes: -1}, "ServerConfig.MaxRoutes -1 must not be negative"},
		{ServerConfig{Group: command.GroupConfig{Priority: priority.Config{Default: 7}}}, "Priority.Default 7 must be P0..P3"},
	} {
		_, err := NewServer(reg, tc.cfg)
		assert.ErrorIs(t, err, command.ErrInvalidConfig, tc.want)
		assert.ErrorContains(t, err, tc.want)
	}
	_, err := NewServer(nil, ServerConfig{})
	assert.ErrorIs(t, err, command.ErrInvalidConfig)
}

func TestServerMaxRoutes(t *testing.T) {
	s, err := NewServer(newTestRegistry(t, nil), ServerConfig{MaxRoutes: 2, Route: func(r *http.Request) string { return r.URL.Path }})
	require.NoError(t, err)
	for _, route := range []string{"/a", "/b", "/c", "/d"} {
		_, err := s.Group(route)
		require.NoError(t, err)
	}
	g, err := s.Group("/e")
	require.NoError(t, err)
	assert.Equal(t, "http "+OtherRoute, g.Name(), "past MaxRoutes, the routes share one group")
	g, err = s.Group("/a")
	require.NoError(t, err)
	assert.Equal(t, "http /a", g.Name())
}

func ExampleServer_Middleware() {
	reg := command.NewRegistry(command.RegistryConfig{})
	defer reg.Close(context.Background())
	s, err := NewServer(reg, ServerConfig{
		Group: command.GroupConfig{MaxConcurrent: 64,
			Priority: priority.Config{Reserve: [4]float64{0, 0.1, 0.25, 0.5}}},
		Priority: PriorityHeader("X-Priority", priority.P2),
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /orders/{id}", s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "order %s", r.PathValue("id"))
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/orders/42")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	g, _ := s.Group("GET /orders/{id}")
	fmt.Println(g.Name(), g.Snapshot().Metrics.Counts[metrics.Success])
	// Output:
	// 200 order 42
	// http GET /orders/{id} 1
}
