package dashboard

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
