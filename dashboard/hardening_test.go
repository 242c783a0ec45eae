package dashboard

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/internal/logtest"
)

// A typed-nil Source (a nil *command.Registry in a Source) is refused at
// construction: it used to be accepted and crash the process at the first
// stream client.
func TestNewRejectsTypedNilSource(t *testing.T) {
	var reg *command.Registry
	var fake *fakeSource
	for name, src := range map[string]Source{"nil": nil, "nil *command.Registry": reg, "nil *fakeSource": fake} {
		_, err := NewStream(src, Config{})
		require.ErrorIs(t, err, ErrInvalidConfig, name)
		assert.Contains(t, err.Error(), "nil Source", name)
		if src != nil {
			assert.Contains(t, err.Error(), fmt.Sprintf("a nil %T", src), "the message names the type")
		}
		_, err = New(src, Config{})
		require.ErrorIs(t, err, ErrInvalidConfig, name)
	}
}

// panickySource panics on its first n snapshots, then serves snap.
type panickySource struct {
	fakeSource
	n int
}

func (p *panickySource) Snapshot() command.Snapshot {
	p.mu.Lock()
	fail := p.n > 0
	p.n--
	p.mu.Unlock()
	if fail {
		panic("snapshot exploded")
	}
	return p.fakeSource.Snapshot()
}

// A Source whose Snapshot panics does not crash the process: the hub logs
// the panic once, sends ping-only frames while it lasts, and serves real
// frames again once the Source recovers.
func TestStreamSurvivesPanickingSource(t *testing.T) {
	var logs logtest.Buffer
	src := &panickySource{fakeSource: fakeSource{snap: sampleSnapshot()}, n: 3}
	s, ts := newTestStream(t, src, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c := openStream(t, newTestClient(), ts.URL+"?delay=100")
	for i := range 3 {
		f, err := c.sse.frame()
		require.NoError(t, err)
		assert.Empty(t, f.events, "frame %d: a ping only while the Source panics", i)
	}
	f, err := c.sse.frame()
	require.NoError(t, err)
	assert.NotNil(t, f.find(TypeHystrixCommand, "GetUser", "users"), "real frames once the Source recovers")
	c.Close()
	waitClients(t, s, 0)

	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, "snapshot exploded"), "one record for a run of failures:\n%s", out)
	assert.Contains(t, out, "level=ERROR")
	assert.Contains(t, out, "goroutine", "the record carries the stack")
	assert.Contains(t, out, "stream frames built again", "recovery is logged")
}

// An Interval below MinInterval (the default 100 ms or a configured one) is
// an error naming the field and the value: it used to lower MinInterval with
// it, and a 500 µs Interval streamed 2,000 frames a second.
func TestStreamIntervalBelowMinInterval(t *testing.T) {
	for _, cfg := range []Config{
		{Interval: 500 * time.Microsecond},
		{Interval: 50 * time.Millisecond, MinInterval: 60 * time.Millisecond},
	} {
		_, err := NewStream(&fakeSource{}, cfg)
		require.ErrorIs(t, err, ErrInvalidConfig, "%+v", cfg)
		assert.Contains(t, err.Error(), "Interval "+cfg.Interval.String())
		assert.Contains(t, err.Error(), "MinInterval "+cfg.WithDefaults().MinInterval.String())
	}
	// A fast Interval is allowed with a MinInterval that allows it.
	s, err := NewStream(&fakeSource{}, Config{Interval: 50 * time.Millisecond, MinInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, 50*time.Millisecond, s.Config().Interval)
}

// A ?delay= past int64 is clamped to MaxInterval like any other long delay
// (it used to get a 400); negative delays, however long, stay a 400.
func TestStreamHugeDelayIsClamped(t *testing.T) {
	s, ts := newTestStream(t, &fakeSource{snap: sampleSnapshot()}, Config{})
	client := newTestClient()
	for _, v := range []string{"99999999999999999999", "9223372036854775807", "123456789012"} {
		c := openStream(t, client, ts.URL+"?delay="+v)
		_, err := c.sse.frame()
		require.NoError(t, err)
		s.mu.Lock()
		_, ok := s.hubs[DefaultMaxInterval]
		n := len(s.hubs)
		s.mu.Unlock()
		assert.True(t, ok && n == 1, "delay=%s: served at MaxInterval", v)
		c.Close()
		waitClients(t, s, 0)
	}
	for _, v := range []string{"-99999999999999999999", "-1"} {
		resp, err := client.Get(ts.URL + "?delay=" + v)
		require.NoError(t, err)
		body := readBody(t, resp)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "delay=%s", v)
		assert.Contains(t, body, "positive whole number of milliseconds")
	}
}

// Clients that stop reading cannot lock the others out: MaxClients raw
// connections that send their request and never read a byte, at the
// slowest delay, each lose their slot about WriteTimeout after the
// connection stops taking bytes (here at once: the first frame is larger
// than the shrunken socket buffers), and a new viewer then gets 200.
func TestStalledClientsLoseTheirSlots(t *testing.T) {
	const writeTimeout = 500 * time.Millisecond
	s, err := NewStream(&fakeSource{snap: bigSnapshot()}, Config{
		MaxInterval: time.Minute, WriteTimeout: writeTimeout, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	ts := httptest.NewUnstartedServer(s)
	ts.Listener = smallBuffers{ts.Listener}
	ts.Start()
	defer ts.Close()

	start := time.Now()
	for range s.Config().MaxClients {
		c, err := net.Dial("tcp", ts.Listener.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		_ = c.(*net.TCPConn).SetReadBuffer(4096)
		_, err = fmt.Fprintf(c, "GET /?delay=60000 HTTP/1.1\r\nHost: test\r\n\r\n")
		require.NoError(t, err)
	}
	waitClients(t, s, s.Config().MaxClients)
	client := newTestClient()
	for {
		resp, err := client.Get(ts.URL + "?delay=60000")
		require.NoError(t, err)
		if resp.StatusCode == http.StatusOK {
			resp.Body.Close()
			break
		}
		resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.Less(t, time.Since(start), writeTimeout+10*time.Second, "stalled clients still hold every slot")
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("a new viewer got 200 after %v (WriteTimeout %v)", time.Since(start), writeTimeout)
	waitClients(t, s, 0)
}
