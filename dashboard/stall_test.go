package dashboard

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// stalledClient opens a raw connection to addr with a small receive
// buffer, sends a stream request and never reads a byte.
func stalledClient(t *testing.T, addr, target string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.(*net.TCPConn).SetReadBuffer(4096))
	_, err = fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: test\r\n\r\n", target)
	require.NoError(t, err)
	return c
}

// MaxClients clients that stop reading lose their slots within about
// WriteTimeout on a plain test server, whose accepted connections keep the
// system's default (autotuned) send buffers: the stream takes the
// connection over and shrinks its send buffer itself. They used to hold
// every slot until megabytes of frames had filled the kernel's buffers
// (41 s here on Linux, minutes at long delays).
func TestStalledReadersLoseTheirSlotsOnADefaultServer(t *testing.T) {
	const writeTimeout = 300 * time.Millisecond
	s, ts := newTestStream(t, &fakeSource{snap: sampleSnapshot()}, Config{
		WriteTimeout: writeTimeout, Logger: slog.New(slog.DiscardHandler),
	})
	addr := ts.Listener.Addr().String()
	start := time.Now()
	for range s.Config().MaxClients {
		stalledClient(t, addr, "/?delay=100")
	}
	waitClients(t, s, s.Config().MaxClients)
	client := newTestClient()
	bound := writeTimeout + 3*time.Second
	for {
		resp, err := client.Get(ts.URL + "?delay=100")
		require.NoError(t, err)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.Less(t, time.Since(start), bound, "stalled clients still hold every slot")
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("a new viewer got 200 after %v (WriteTimeout %v, bound %v)", time.Since(start), writeTimeout, bound)
	waitClients(t, s, 0)
}

// An HTTP/1.1 stream is served on the connection the stream takes over:
// its own response head, a body that runs until the connection closes,
// and a client that closes the connection is released at once, long
// before the next frame is due.
func TestStreamTakesOverHTTP1Connection(t *testing.T) {
	s, ts := newTestStream(t, &fakeSource{snap: sampleSnapshot()}, Config{MaxInterval: time.Hour})
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	req, err := http.NewRequest(http.MethodGet, ts.URL+"/?delay=3600000", nil)
	require.NoError(t, err)
	require.NoError(t, req.Write(conn))
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	require.NoError(t, err)

	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "HTTP/1.1", resp.Proto)
	assert.True(t, resp.Close, "Connection: close")
	assert.Empty(t, resp.TransferEncoding, "no chunking: the body runs until the connection closes")
	assert.EqualValues(t, -1, resp.ContentLength)
	h := resp.Header
	assert.Equal(t, "text/event-stream;charset=UTF-8", h.Get("Content-Type"))
	assert.Equal(t, "no-cache, no-store, max-age=0, must-revalidate", h.Get("Cache-Control"))
	assert.Equal(t, "no", h.Get("X-Accel-Buffering"))
	_, err = http.ParseTime(h.Get("Date"))
	assert.NoError(t, err, "Date header")
	f, err := newSSEReader(resp.Body).frame()
	require.NoError(t, err)
	assert.NotNil(t, f.find(TypeHystrixCommand, "GetUser", "users"))

	waitClients(t, s, 1)
	require.NoError(t, conn.Close())
	waitClients(t, s, 0) // the next frame is an hour away
}

// An HTTP/1.1 stream over TLS is taken over too (the send buffer is set
// on the TCP connection under the *tls.Conn).
func TestStreamTakesOverTLSConnection(t *testing.T) {
	s, err := NewStream(&fakeSource{snap: sampleSnapshot()}, Config{MaxInterval: time.Hour})
	require.NoError(t, err)
	ts := httptest.NewTLSServer(s)
	defer ts.Close()
	c := openStream(t, ts.Client(), ts.URL+"/?delay=3600000")
	defer c.Close()
	assert.Equal(t, 1, c.resp.ProtoMajor)
	assert.True(t, c.resp.Close, "Connection: close")
	assert.Empty(t, c.resp.TransferEncoding, "the stream's own response head")
	f, err := c.sse.frame()
	require.NoError(t, err)
	assert.NotNil(t, f.find(TypeHystrixCommand, "GetUser", "users"))
	c.Close()
	waitClients(t, s, 0)
}

// noHijack hides every optional interface of the ResponseWriter but Flush,
// as some middleware does.
type noHijack struct{ w http.ResponseWriter }

func (n noHijack) Header() http.Header         { return n.w.Header() }
func (n noHijack) Write(p []byte) (int, error) { return n.w.Write(p) }
func (n noHijack) WriteHeader(code int)        { n.w.WriteHeader(code) }
func (n noHijack) Flush()                      { n.w.(http.Flusher).Flush() }

func wrapNoHijack(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(noHijack{w}, r) })
}

// A ResponseWriter that cannot be hijacked (a wrapper, HTTP/2) is served
// through the ResponseWriter as before, and a client that goes away is
// noticed through the request context.
func TestStreamFallsBackWithoutHijack(t *testing.T) {
	s, err := NewStream(&fakeSource{snap: sampleSnapshot()}, Config{
		MaxInterval: time.Hour, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	wrapped := httptest.NewServer(wrapNoHijack(s))
	defer wrapped.Close()
	h2 := httptest.NewUnstartedServer(s)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	defer h2.Close()

	for name, tc := range map[string]struct {
		client *http.Client
		url    string
		proto  int
	}{
		"wrapper": {newTestClient(), wrapped.URL, 1},
		"HTTP/2":  {h2.Client(), h2.URL, 2},
	} {
		c := openStream(t, tc.client, tc.url+"/?delay=3600000")
		assert.Equal(t, tc.proto, c.resp.ProtoMajor, name)
		if tc.proto == 1 {
			assert.Equal(t, []string{"chunked"}, c.resp.TransferEncoding, "%s: net/http's framing", name)
		}
		assert.Equal(t, "text/event-stream;charset=UTF-8", c.resp.Header.Get("Content-Type"), name)
		f, err := c.sse.frame()
		require.NoError(t, err, name)
		assert.NotNil(t, f.find(TypeHystrixCommand, "GetUser", "users"), name)
		waitClients(t, s, 1)
		c.Close()
		waitClients(t, s, 0)
	}
}

// http.Server.Shutdown ends the server's streams, taken over or not: it
// does not track connections the stream took over, and it waits for
// active requests, which a stream never stops being by itself.
// Shutdown then returns at once, the clients see the end of the stream,
// and no goroutine is left.
func TestServerShutdownEndsStreams(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	s, err := NewStream(&fakeSource{snap: sampleSnapshot()}, Config{MaxInterval: time.Hour})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/raw", s)
	mux.Handle("/wrapped", wrapNoHijack(s))
	srv := &http.Server{Handler: mux}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	client := newTestClient()
	var conns []*streamConn
	for _, path := range []string{"/raw", "/raw", "/wrapped"} {
		c := openStream(t, client, "http://"+ln.Addr().String()+path+"?delay=3600000")
		defer c.Close()
		_, err := c.sse.frame()
		require.NoError(t, err)
		conns = append(conns, c)
	}
	waitClients(t, s, 3)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(ctx))
	require.ErrorIs(t, <-served, http.ErrServerClosed)
	waitClients(t, s, 0)
	for i, c := range conns {
		_, err := c.sse.frame()
		assert.Error(t, err, "stream %d ended", i)
		c.Close()
	}
	client.CloseIdleConnections()
	goleak.VerifyNone(t, ignore)
}

// Stream.Close ends every client, taken over or not, waits for their
// handlers, and answers later requests 503.
func TestStreamCloseEndsClients(t *testing.T) {
	s, ts := newTestStream(t, &fakeSource{snap: sampleSnapshot()}, Config{MaxInterval: time.Hour})
	wrapped := httptest.NewServer(wrapNoHijack(s))
	defer wrapped.Close()
	client := newTestClient()
	a := openStream(t, client, ts.URL+"?delay=3600000")
	defer a.Close()
	b := openStream(t, client, wrapped.URL+"?delay=3600000")
	defer b.Close()
	for _, c := range []*streamConn{a, b} {
		_, err := c.sse.frame()
		require.NoError(t, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, s.Close(ctx))
	assert.Zero(t, s.Clients(), "Close returns once every handler has")
	for _, c := range []*streamConn{a, b} {
		_, err := c.sse.frame()
		assert.Error(t, err, "the stream ended")
	}
	resp, err := client.Get(ts.URL)
	require.NoError(t, err)
	body := readBody(t, resp)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, body, "stream closed")

	done, stop := context.WithCancel(context.Background())
	stop()
	assert.NoError(t, s.Close(done), "closing again, with nothing left, is nil even with an ended ctx")
}

// blockingWriter is a ResponseWriter (flushable, no deadlines, no hijack)
// whose Write blocks until release is closed: a client that never reads,
// behind a writer that cannot time out.
type blockingWriter struct {
	header  http.Header
	writing chan struct{} // gets a value when Write starts
	release chan struct{}
}

func (b *blockingWriter) Header() http.Header { return b.header }
func (b *blockingWriter) WriteHeader(int)     {}
func (b *blockingWriter) Flush()              {}
func (b *blockingWriter) Write(p []byte) (int, error) {
	select {
	case b.writing <- struct{}{}:
	default:
	}
	<-b.release
	return len(p), nil
}

// Close waits for the handlers only as long as ctx allows, and says how
// many are still ending.
func TestStreamCloseHonoursContext(t *testing.T) {
	s, err := NewStream(&fakeSource{snap: sampleSnapshot()}, Config{MaxInterval: time.Hour})
	require.NoError(t, err)
	w := &blockingWriter{header: make(http.Header), writing: make(chan struct{}, 1), release: make(chan struct{})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/?delay=3600000", nil))
	}()
	<-w.writing // the first frame

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = s.Close(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "1 stream clients still ending")

	close(w.release)
	<-served
	require.NoError(t, s.Close(context.Background()))
	assert.Zero(t, s.Clients())
}
