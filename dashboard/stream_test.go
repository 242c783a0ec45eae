package dashboard

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newTestStream serves a Stream of src on a loopback test server.
func newTestStream(t *testing.T, src Source, cfg Config) (*Stream, *httptest.Server) {
	t.Helper()
	s, err := NewStream(src, cfg)
	require.NoError(t, err)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

// waitClients waits until s serves n clients.
func waitClients(t *testing.T, s *Stream, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return s.Clients() == n }, 5*time.Second, 5*time.Millisecond,
		"want %d clients", n)
}

func TestStreamHeadersAndFraming(t *testing.T) {
	_, ts := newTestStream(t, &fakeSource{snap: sampleSnapshot()}, Config{})
	c := openStream(t, newTestClient(), ts.URL)
	defer c.Close()

	h := c.resp.Header
	assert.Equal(t, "text/event-stream;charset=UTF-8", h.Get("Content-Type"))
	assert.Equal(t, "no-cache, no-store, max-age=0, must-revalidate", h.Get("Cache-Control"))
	assert.Equal(t, "no-cache", h.Get("Pragma"))

	f, err := c.sse.frame() // checks "data: " + JSON + blank line, then the ping
	require.NoError(t, err)
	// Hystrix's order: every command, then every thread pool; then ours.
	var types []string
	for _, e := range f.events {
		if n := len(types); n == 0 || types[n-1] != e["type"] {
			types = append(types, e["type"].(string))
		}
	}
	assert.Equal(t, []string{TypeHystrixCommand, TypeHystrixThreadPool, TypeBulwarkCommand, TypeBulwarkGroup}, types)
	assert.Len(t, f.ofType(TypeHystrixCommand), 3)
	assert.Len(t, f.ofType(TypeHystrixThreadPool), 1, "a pool event for the pool group only")
	assert.Len(t, f.ofType(TypeBulwarkCommand), 3)
	assert.Len(t, f.ofType(TypeBulwarkGroup), 2)
}

func TestStreamHystrixKeysAndTypes(t *testing.T) {
	_, ts := newTestStream(t, &fakeSource{snap: sampleSnapshot()}, Config{})
	c := openStream(t, newTestClient(), ts.URL)
	defer c.Close()
	f, err := c.sse.frame()
	require.NoError(t, err)

	require.Len(t, hystrixCommandKeys, 48)
	require.Len(t, hystrixThreadPoolKeys, 17)
	check := func(ev map[string]any, keys map[string]string) {
		t.Helper()
		for k, kind := range keys {
			v, ok := ev[k]
			if assert.True(t, ok, "%s %v: key %s missing", ev["type"], ev["name"], k) {
				assert.True(t, kindOK(kind, v), "%s %v: key %s = %#v, want %s", ev["type"], ev["name"], k, v, kind)
			}
		}
		assert.Len(t, ev, len(keys), "%s %v has keys beyond the reference", ev["type"], ev["name"])
	}
	for _, ev := range f.ofType(TypeHystrixCommand) {
		check(ev, hystrixCommandKeys)
	}
	for _, ev := range f.ofType(TypeHystrixThreadPool) {
		check(ev, hystrixThreadPoolKeys)
	}
}

func TestStreamHystrixValues(t *testing.T) {
	src := &fakeSource{snap: sampleSnapshot()}
	_, ts := newTestStream(t, src, Config{})
	c := openStream(t, newTestClient(), ts.URL)
	defer c.Close()
	f, err := c.sse.frame()
	require.NoError(t, err)
	snap := sampleSnapshot()
	users := snap.Groups[1]
	get := users.Commands[0]

	ev := f.find(TypeHystrixCommand, "GetUser", "users")
	require.NotNil(t, ev)
	assert.InDelta(t, time.Now().UnixMilli(), num(ev["currentTime"]), 5000)
	assert.Equal(t, true, ev["isCircuitBreakerOpen"])
	assert.EqualValues(t, 80, num(ev["errorPercentage"]), "the breaker's health ratio")
	assert.EqualValues(t, 24, num(ev["errorCount"]))
	assert.EqualValues(t, 30, num(ev["requestCount"]))
	counts := get.Metrics.Counts
	for key, want := range map[string]int64{
		"rollingCountSuccess":            counts[0],
		"rollingCountFailure":            counts[1],
		"rollingCountTimeout":            counts[2],
		"rollingCountBadRequests":        counts[3],
		"rollingCountShortCircuited":     counts[4],
		"rollingCountThreadPoolRejected": counts[metrics.ThreadPoolRejected] + counts[metrics.QueueTimeout],
		"rollingCountSemaphoreRejected":  counts[metrics.SemaphoreRejected] + counts[metrics.RateLimited] + counts[metrics.Throttled] + counts[metrics.PriorityRejected],
		"rollingCountFallbackSuccess":    counts[7],
		"rollingCountFallbackFailure":    counts[8],
		"rollingCountFallbackRejection":  counts[9],
		"rollingCountFallbackMissing":    counts[10],
		"rollingCountExceptionsThrown":   counts[11],
		"rollingCountEmit":               0,
		"rollingCountCollapsedRequests":  counts[metrics.Coalesced],
	} {
		assert.EqualValues(t, want, num(ev[key]), key)
	}
	assert.EqualValues(t, 4, num(ev["currentConcurrentExecutionCount"]))
	assert.EqualValues(t, 7, num(ev["rollingMaxConcurrentExecutionCount"]))
	assert.EqualValues(t, 6, num(ev["latencyExecute_mean"]))
	assert.EqualValues(t, 9, num(ev["latencyTotal_mean"]))
	lat := ev["latencyExecute"].(map[string]any)
	for i, p := range percentileKeys {
		assert.EqualValues(t, 2*(i+1), num(lat[p]), "latencyExecute[%s]", p)
	}
	assert.EqualValues(t, 27, num(ev["latencyTotal"].(map[string]any)["100"]))
	assert.EqualValues(t, 20, num(ev["propertyValue_circuitBreakerRequestVolumeThreshold"]))
	assert.EqualValues(t, 10000, num(ev["propertyValue_circuitBreakerSleepWindowInMilliseconds"]), "backed-off open duration")
	assert.EqualValues(t, 50, num(ev["propertyValue_circuitBreakerErrorThresholdPercentage"]))
	assert.Equal(t, "THREAD", ev["propertyValue_executionIsolationStrategy"])
	assert.EqualValues(t, 250, num(ev["propertyValue_executionTimeoutInMilliseconds"]))
	assert.EqualValues(t, 250, num(ev["propertyValue_executionIsolationThreadTimeoutInMilliseconds"]))
	assert.EqualValues(t, 10, num(ev["propertyValue_executionIsolationSemaphoreMaxConcurrentRequests"]))
	assert.EqualValues(t, 8, num(ev["propertyValue_fallbackIsolationSemaphoreMaxConcurrentRequests"]))
	assert.EqualValues(t, 10000, num(ev["propertyValue_metricsRollingStatisticalWindowInMilliseconds"]))
	assert.Nil(t, ev["propertyValue_executionIsolationThreadPoolKeyOverride"])
	assert.EqualValues(t, 1, num(ev["reportingHosts"]))
	assert.Equal(t, "users", ev["threadPool"])

	list := f.find(TypeHystrixCommand, "ListUsers", "users")
	require.NotNil(t, list)
	assert.Equal(t, false, list["isCircuitBreakerOpen"])
	assert.EqualValues(t, 10, num(list["errorPercentage"]))

	// The semaphore group: strategy SEMAPHORE, no timeout reads 0, and the
	// name arrives intact (JSON-escaped, not mangled).
	xss := f.find(TypeHystrixCommand, `<img src=x onerror=alert(1)>`, "cache")
	require.NotNil(t, xss)
	assert.Equal(t, "SEMAPHORE", xss["propertyValue_executionIsolationStrategy"])
	assert.EqualValues(t, 0, num(xss["propertyValue_executionTimeoutInMilliseconds"]))
	assert.EqualValues(t, 20, num(xss["propertyValue_executionIsolationSemaphoreMaxConcurrentRequests"]))

	pool := f.find(TypeHystrixThreadPool, "users", "")
	require.NotNil(t, pool)
	for key, want := range map[string]int64{
		"currentActiveCount":                        4,
		"currentQueueSize":                          3,
		"currentPoolSize":                           10,
		"currentCorePoolSize":                       10,
		"currentMaximumPoolSize":                    10,
		"currentLargestPoolSize":                    10,
		"currentCompletedTaskCount":                 1234,
		"currentTaskCount":                          1234 + 4 + 3,
		"rollingCountThreadsExecuted":               counts[0] + counts[1] + counts[2] + counts[3],
		"rollingMaxActiveThreads":                   7,
		"rollingCountCommandRejections":             counts[5] + counts[14],
		"propertyValue_queueSizeRejectionThreshold": 5,
		"propertyValue_metricsRollingStatisticalWindowInMilliseconds": 10000,
		"reportingHosts": 1,
	} {
		assert.EqualValues(t, want, num(pool[key]), key)
	}
}

func TestStreamNativeEvents(t *testing.T) {
	src := &fakeSource{snap: sampleSnapshot()}
	_, ts := newTestStream(t, src, Config{})
	c := openStream(t, newTestClient(), ts.URL)
	defer c.Close()
	f, err := c.sse.frame()
	require.NoError(t, err)

	ev := f.find(TypeBulwarkCommand, "GetUser", "users")
	require.NotNil(t, ev)
	assert.Equal(t, "open", ev["state"])
	assert.Equal(t, "normal", ev["mode"])
	assert.Equal(t, "probe_failed", ev["reason"], "the last transition's reason")
	assert.EqualValues(t, 2000, num(ev["timeInStateMs"]))
	assert.EqualValues(t, 10000, num(ev["openDurationMs"]))
	assert.EqualValues(t, 8000, num(ev["retryAfterMs"]))
	assert.EqualValues(t, 3, num(ev["probesNeeded"]))
	assert.InDelta(t, 0.8, flt(ev["errorRatio"]), 1e-9)
	assert.EqualValues(t, 4, num(ev["inFlight"]))
	assert.EqualValues(t, 3, num(ev["detached"]))
	assert.EqualValues(t, 250, num(ev["timeoutMs"]))
	assert.Equal(t, "closed", ev["groupState"])
	assert.EqualValues(t, 13, num(ev["rollingCountCancelled"]))
	assert.EqualValues(t, 14, num(ev["rollingCountSlow"]))
	assert.EqualValues(t, 15, num(ev["rollingCountQueueTimeout"]), "QUEUE_TIMEOUT apart")
	rateLimited := sampleSnapshot().Groups[1].Commands[0].Metrics.Counts[metrics.RateLimited] // users/GetUser
	assert.EqualValues(t, rateLimited, num(ev["rollingCountRateLimited"]), "RATE_LIMITED apart")
	retried := sampleSnapshot().Groups[1].Commands[0].Metrics.Counts[metrics.Retried]
	assert.EqualValues(t, retried, num(ev["rollingCountRetried"]), "RETRIED")
	coalesced := sampleSnapshot().Groups[1].Commands[0].Metrics.Counts[metrics.Coalesced]
	assert.EqualValues(t, coalesced, num(ev["rollingCountCoalesced"]), "COALESCED")
	throttled := sampleSnapshot().Groups[1].Commands[0].Metrics.Counts[metrics.Throttled]
	assert.Positive(t, throttled)
	assert.EqualValues(t, throttled, num(ev["rollingCountThrottled"]), "THROTTLED apart")
	shed := sampleSnapshot().Groups[1].Commands[0].Metrics.Counts[metrics.PriorityRejected]
	assert.EqualValues(t, shed, num(ev["rollingCountPriorityRejected"]), "PRIORITY_REJECTED apart")

	// Transitions in wall time: the last one was Since (2 s) before the
	// snapshot, the first one 6 s before the last.
	tr := ev["transitions"].([]any)
	require.Len(t, tr, 3)
	now := num(ev["currentTime"])
	first, last := tr[0].(map[string]any), tr[2].(map[string]any)
	assert.Equal(t, "closed", first["from"])
	assert.Equal(t, "open", first["to"])
	assert.Equal(t, "error_ratio", first["reason"])
	assert.EqualValues(t, 25, num(first["requests"]))
	assert.EqualValues(t, now-8000, num(first["at"]))
	assert.Equal(t, "probe_failed", last["reason"])
	assert.EqualValues(t, now-2000, num(last["at"]))

	firstEv := f.ofType(TypeBulwarkCommand)[0] // the first encoded, with no transitions
	assert.Equal(t, []any{}, firstEv["transitions"], "an empty list, not null")
	for _, g := range f.ofType(TypeBulwarkGroup) {
		assert.Equal(t, []any{}, g["transitions"], "an empty list, not null")
	}

	list := f.find(TypeBulwarkCommand, "ListUsers", "users")
	require.NotNil(t, list)
	assert.InDelta(t, 0.3281, flt(list["degradedRate"]), 1e-9, "four decimals on the wire (21 of 64 calls)")
	assert.EqualValues(t, 0, num(list["detached"]))
	assert.Equal(t, []any{}, list["transitions"], "an empty list, not null")

	g := f.find(TypeBulwarkGroup, "users", "")
	require.NotNil(t, g)
	assert.Equal(t, "THREAD", g["strategy"])
	for key, want := range map[string]int64{
		"capacity": 10, "queueCapacity": 5, "active": 4, "queued": 3, "detached": 2,
		"largestActive": 10, "completed": 1234, "rejected": 56, "timeoutMs": 1000, "fallbackLimit": 8,
		"windowMs": 10000, "throttleK": 2, "throttleRequests": 100, "throttleAccepts": 30, "adaptiveLimit": 10,
	} {
		assert.EqualValues(t, want, num(g[key]), key)
	}
	assert.InDelta(t, 0.396, flt(g["throttleProbability"]), 1e-9, "(100 − 2·30) / 101, rounded")
	assert.InDelta(t, 2.5, flt(g["adaptiveNoLoadMs"]), 1e-9)
	assert.InDelta(t, 3.2, flt(g["adaptiveLatencyMs"]), 1e-9, "in µs: the 999 ns are dropped")
	sem := f.find(TypeBulwarkGroup, "cache", "")
	require.NotNil(t, sem)
	assert.Equal(t, "SEMAPHORE", sem["strategy"])
	assert.EqualValues(t, 0, num(sem["timeoutMs"]))
	assert.EqualValues(t, 0, num(sem["throttleK"]), "no throttle")
	assert.EqualValues(t, 0, num(sem["adaptiveLimit"]), "no adaptive limit")
}

// TestStreamDelay: ?delay= sets how often the stream's hub takes a
// snapshot and sends a frame. It counts the hub's snapshots (the source's
// calls), not the frames read: a client that falls behind skips frames by
// design, so on a loaded machine the frames read undercount the ticks. The
// span is measured, not assumed, for the same reason.
func TestStreamDelay(t *testing.T) {
	src := &fakeSource{snap: sampleSnapshot()}
	s, ts := newTestStream(t, src, Config{})
	client := newTestClient()

	// ticks returns the snapshots the hub took while one client read the
	// stream at url for about span (after its first frame), and the time
	// that took.
	ticks := func(url string, span time.Duration) (int, time.Duration) {
		c := openStream(t, client, url)
		_, err := c.sse.frame()
		require.NoError(t, err)
		start, calls := time.Now(), src.Calls()
		for time.Since(start) < span {
			_, err := c.sse.frame()
			require.NoError(t, err)
		}
		n, took := src.Calls()-calls, time.Since(start)
		c.Close()
		waitClients(t, s, 0) // the hub stops with its last client
		return n, took
	}
	// check: one snapshot per delay, with generous bounds (half as many on
	// a loaded machine, never more than one per delay plus the one in
	// flight and the previous hub's last).
	check := func(name string, n int, took, delay time.Duration) {
		want := float64(took) / float64(delay)
		assert.True(t, float64(n) >= want/2 && float64(n) <= want+2, "%s: %d snapshots in %v, want about %.1f", name, n, took, want)
	}
	n, took := ticks(ts.URL+"?delay=100", 1500*time.Millisecond)
	check("delay=100", n, took, 100*time.Millisecond)
	n, took = ticks(ts.URL, 2*time.Second)
	check("default delay", n, took, DefaultInterval)
	n, took = ticks(ts.URL+"?delay=1", 1500*time.Millisecond)
	check("delay=1 (clamped to 100)", n, took, 100*time.Millisecond)
}

func TestStreamBadDelay(t *testing.T) {
	s, ts := newTestStream(t, &fakeSource{snap: sampleSnapshot()}, Config{})
	client := newTestClient()
	for _, v := range []string{"abc", "-5", "0", "1.5", "1e3", ""} {
		resp, err := client.Get(ts.URL + "/?delay=" + v)
		require.NoError(t, err)
		if v == "" {
			resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode, "empty delay means the default")
			continue
		}
		body := readBody(t, resp)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "delay=%q", v)
		assert.Contains(t, body, "delay must be a positive whole number of milliseconds", "delay=%q", v)
	}
	waitClients(t, s, 0)
}

func TestStreamMethodNotAllowed(t *testing.T) {
	_, ts := newTestStream(t, &fakeSource{snap: sampleSnapshot()}, Config{})
	resp, err := newTestClient().Post(ts.URL, "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Equal(t, "GET", resp.Header.Get("Allow"))
}

func TestStreamConnectionCap(t *testing.T) {
	s, ts := newTestStream(t, &fakeSource{snap: sampleSnapshot()}, Config{MaxClients: 2})
	client := newTestClient()
	a := openStream(t, client, ts.URL)
	b := openStream(t, client, ts.URL+"?delay=200")
	waitClients(t, s, 2)

	resp, err := client.Get(ts.URL)
	require.NoError(t, err)
	body := readBody(t, resp)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, body, "connection limit reached (2)")

	a.Close()
	waitClients(t, s, 1)
	c := openStream(t, client, ts.URL)
	_, err = c.sse.frame()
	require.NoError(t, err)
	b.Close()
	c.Close()
	waitClients(t, s, 0)
}

func TestStreamDefaultCapIsFive(t *testing.T) {
	s, err := NewStream(&fakeSource{}, Config{})
	require.NoError(t, err)
	assert.Equal(t, 5, s.Config().MaxClients)
	assert.Equal(t, 500*time.Millisecond, s.Config().Interval)
}

// One snapshot per tick per delay, whatever the number of clients, and the
// hub goes away with its last client.
func TestStreamSharesOneSnapshotPerTick(t *testing.T) {
	src := &fakeSource{snap: sampleSnapshot()}
	s, ts := newTestStream(t, src, Config{MaxClients: 20})
	client := newTestClient()
	var conns []*streamConn
	for range 10 {
		conns = append(conns, openStream(t, client, ts.URL+"?delay=100"))
	}
	waitClients(t, s, 10)
	before := src.Calls()
	start := time.Now()
	for _, c := range conns {
		for range 5 {
			_, err := c.sse.frame()
			require.NoError(t, err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	ticks := int(time.Since(start)/(100*time.Millisecond)) + 2
	calls := src.Calls() - before
	assert.LessOrEqual(t, calls, ticks, "10 clients, %d ticks: one snapshot per tick, got %d", ticks, calls)
	s.mu.Lock()
	assert.Len(t, s.hubs, 1)
	s.mu.Unlock()

	// A second delay gets its own hub.
	other := openStream(t, client, ts.URL+"?delay=300")
	_, err := other.sse.frame()
	require.NoError(t, err)
	s.mu.Lock()
	assert.Len(t, s.hubs, 2)
	s.mu.Unlock()

	other.Close()
	for _, c := range conns {
		c.Close()
	}
	waitClients(t, s, 0)
	s.mu.Lock()
	assert.Empty(t, s.hubs)
	s.mu.Unlock()
	stopped := src.Calls()
	time.Sleep(250 * time.Millisecond)
	assert.Equal(t, stopped, src.Calls(), "no snapshot once the last client left")
}

// A client that joins a running hub gets the newest frame at once, not
// after the next tick.
func TestStreamLateJoinerGetsFrameAtOnce(t *testing.T) {
	_, ts := newTestStream(t, &fakeSource{snap: sampleSnapshot()}, Config{MaxInterval: time.Minute})
	client := newTestClient()
	first := openStream(t, client, ts.URL+"?delay=60000")
	defer first.Close()
	_, err := first.sse.frame()
	require.NoError(t, err)

	start := time.Now()
	late := openStream(t, client, ts.URL+"?delay=60000")
	defer late.Close()
	f, err := late.sse.frame()
	require.NoError(t, err)
	assert.NotEmpty(t, f.events)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestStreamConfigValidation(t *testing.T) {
	src := &fakeSource{}
	for name, cfg := range map[string]Config{
		"Interval":      {Interval: -1},
		"MinInterval":   {MinInterval: -1},
		"MaxInterval":   {MaxInterval: -1},
		"MaxClients":    {MaxClients: -1},
		"WriteTimeout":  {WriteTimeout: -time.Second},
		"WriteBuffer":   {WriteBuffer: -1},
		"min above max": {MinInterval: time.Second, MaxInterval: 500 * time.Millisecond},
		"above max":     {Interval: time.Minute, MaxInterval: time.Second},
	} {
		_, err := NewStream(src, cfg)
		require.ErrorIs(t, err, ErrInvalidConfig, name)
		if !strings.Contains(name, " ") {
			assert.Contains(t, err.Error(), name, "the message names the field")
		}
	}
	_, err := NewStream(nil, Config{})
	require.ErrorIs(t, err, ErrInvalidConfig)

	cfg := Config{}.WithDefaults()
	assert.Equal(t, DefaultInterval, cfg.Interval)
	assert.Equal(t, DefaultMinInterval, cfg.MinInterval)
	assert.Equal(t, DefaultMaxInterval, cfg.MaxInterval)
	assert.Equal(t, DefaultWriteTimeout, cfg.WriteTimeout)
	assert.Equal(t, DefaultWriteBuffer, cfg.WriteBuffer)
	assert.NotNil(t, cfg.Logger)
}

// The frame is valid JSON per event even for names that need escaping.
func TestStreamEscapesNamesAsJSON(t *testing.T) {
	s, err := NewStream(&fakeSource{snap: sampleSnapshot()}, Config{})
	require.NoError(t, err)
	var e encoder
	data, err := s.frames(&e, 0)
	require.NoError(t, err)
	assert.NotContains(t, string(data), "<img", "HTML-sensitive characters are \\u-escaped")
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "data: "); ok {
			assert.True(t, json.Valid([]byte(rest)), rest)
		}
	}
}
