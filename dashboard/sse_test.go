package dashboard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/adaptive"
	"github.com/bulwark-go/bulwark/command/throttle"
	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
)

// sseFrame is what a client read between two pings: the decoded events.
type sseFrame struct {
	events []map[string]any
}

// ofType returns the frame's events of type typ.
func (f sseFrame) ofType(typ string) []map[string]any {
	var out []map[string]any
	for _, e := range f.events {
		if e["type"] == typ {
			out = append(out, e)
		}
	}
	return out
}

// find returns the event of type typ and name (and group, if not empty).
func (f sseFrame) find(typ, name, group string) map[string]any {
	for _, e := range f.ofType(typ) {
		if e["name"] == name && (group == "" || e["group"] == group) {
			return e
		}
	}
	return nil
}

// sseReader reads a hystrix.stream: "data: <json>" events and "ping: "
// lines, each followed by a blank line, and nothing else.
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 1<<16)}
}

// frame reads up to and including the next ping. It checks the framing: no
// event names, every record ends with a blank line.
func (s *sseReader) frame() (sseFrame, error) {
	var f sseFrame
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return f, err
		}
		blank, err := s.r.ReadString('\n')
		if err != nil {
			return f, err
		}
		if blank != "\n" {
			return f, fmt.Errorf("record %q not followed by a blank line but by %q", line, blank)
		}
		switch {
		case line == "ping: \n":
			return f, nil
		case strings.HasPrefix(line, "data: "):
			dec := json.NewDecoder(strings.NewReader(strings.TrimPrefix(line, "data: ")))
			dec.UseNumber()
			var ev map[string]any
			if err := dec.Decode(&ev); err != nil {
				return f, fmt.Errorf("event %q: %w", line, err)
			}
			if dec.More() {
				return f, fmt.Errorf("event %q: more than one JSON value", line)
			}
			f.events = append(f.events, ev)
		default:
			return f, fmt.Errorf("unexpected record %q", line)
		}
	}
}

// streamConn is one open stream connection.
type streamConn struct {
	resp   *http.Response
	sse    *sseReader
	cancel context.CancelFunc
}

func (c *streamConn) Close() {
	c.cancel()
	c.resp.Body.Close()
}

// openStream connects to url and checks that the stream answered 200.
func openStream(t *testing.T, client *http.Client, url string) *streamConn {
	t.Helper()
	c, err := dialStream(client, url)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, c.resp.StatusCode)
	return c
}

func dialStream(client *http.Client, url string) (*streamConn, error) {
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	return &streamConn{resp: resp, sse: newSSEReader(resp.Body), cancel: cancel}, nil
}

// newClient returns an HTTP client that keeps no idle connection (nothing
// left for goleak to find).
func newTestClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}

// fakeSource serves a fixed snapshot and counts the calls.
type fakeSource struct {
	mu    sync.Mutex
	snap  command.Snapshot
	calls int
}

func (f *fakeSource) Snapshot() command.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	s := f.snap
	s.Time = time.Now()
	return s
}

func (f *fakeSource) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// latency returns a Latency whose percentiles are base, 2×base, ... 9×base.
func latency(base time.Duration) metrics.Latency {
	l := metrics.Latency{Count: 100, Mean: 3 * base}
	for i := range l.Percentiles {
		l.Percentiles[i] = time.Duration(i+1) * base
	}
	return l
}

// sampleSnapshot has a pool group "users" with two commands (one of them
// with an open breaker) and a semaphore group "cache" with one command
// whose name needs escaping.
func sampleSnapshot() command.Snapshot {
	window := metrics.Window{Length: 10 * time.Second, Buckets: 10}
	var counts metrics.Counts
	for e := range metrics.NumEvents {
		counts[e] = int64(e) + 1 // distinct, so a swapped key shows
	}
	closed := circuit.Snapshot{
		State: circuit.Closed, Mode: circuit.Normal, Since: 90 * time.Second,
		OpenDuration: 5 * time.Second, RampShare: 1,
		Health: circuit.Health{Requests: 40, Failures: 3, Timeouts: 1, Slow: 2, ErrorRatio: 0.1, SlowRatio: 0.05},
		Config: circuit.Config{MinRequests: 20, FailureRatio: 0.5, HalfOpenSuccesses: 3},
	}
	open := closed
	open.State = circuit.Open
	open.Since = 2 * time.Second
	open.OpenDuration = 10 * time.Second
	open.RetryAfter = 8 * time.Second
	open.Health = circuit.Health{Requests: 30, Failures: 20, Timeouts: 4, ErrorRatio: 0.8}
	open.Transitions = []circuit.Transition{
		{From: circuit.Closed, To: circuit.Open, Reason: circuit.ReasonErrorRatio, At: 100 * time.Second,
			Health: circuit.Health{Requests: 25, Failures: 15, ErrorRatio: 0.6}, OpenDuration: 5 * time.Second},
		{From: circuit.Open, To: circuit.HalfOpen, Reason: circuit.ReasonOpenElapsed, At: 105 * time.Second},
		{From: circuit.HalfOpen, To: circuit.Open, Reason: circuit.ReasonProbeFailed, At: 106 * time.Second,
			OpenDuration: 10 * time.Second},
	}
	met := metrics.Snapshot{Window: window, Counts: counts, Cumulative: counts, Max: 7,
		Run: latency(2 * time.Millisecond), Total: latency(3 * time.Millisecond)}
	third := met // ListUsers: 21 of its 64 calls degraded, 0.328125: more than four decimals
	third.Counts[metrics.FallbackSuccess] = third.Counts.Calls() / 3
	return command.Snapshot{Groups: []command.GroupSnapshot{
		{
			Name:     "cache",
			Config:   command.GroupConfig{Strategy: command.Semaphore, Timeout: command.NoTimeout, FallbackLimit: 10},
			Bulkhead: isolation.Stats{Capacity: 20, Active: 2, LargestActive: 9, Completed: 500},
			Breaker:  closed, Metrics: met,
			Commands: []command.CommandSnapshot{{
				Name: `<img src=x onerror=alert(1)>`, InFlight: 2, Timeout: command.NoTimeout,
				Breaker: closed, Metrics: met,
			}},
		},
		{
			Name:   "users",
			Config: command.GroupConfig{Strategy: command.Thread, Timeout: time.Second, FallbackLimit: 8},
			Bulkhead: isolation.Stats{Capacity: 10, QueueCapacity: 5,
				Active: 4, Queued: 3, Detached: 2, LargestActive: 10, Completed: 1234, Rejected: 56},
			Breaker: closed, Metrics: met,
			Throttle: throttle.Status{K: 2, Requests: 100, Accepts: 30, Probability: 40.0 / 101},
			Adaptive: adaptive.Status{Limit: 10, NoLoad: 2500 * time.Microsecond, Latency: 3200*time.Microsecond + 999},
			Commands: []command.CommandSnapshot{
				{Name: "GetUser", InFlight: 4, Detached: 3, Timeout: 250 * time.Millisecond,
					Breaker: open, Metrics: met},
				{Name: "ListUsers", InFlight: 0, Timeout: time.Second,
					Breaker: closed, Metrics: third},
			},
		},
	}}
}

// readBody reads a short response body.
func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	var b bytes.Buffer
	_, err := io.Copy(&b, resp.Body)
	require.NoError(t, err)
	return b.String()
}
