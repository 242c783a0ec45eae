package browsertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/dashboard"
	"github.com/bulwark-go/bulwark/metrics"
)

// A synthetic stream serves frames a test describes (hundreds of commands,
// ten minutes of history, jitter on cue) without running the calls or
// waiting for the time to pass. Its events are copies of events a real
// stream sent, with fields changed: a key the test sets must be one the
// real event has (set fails the test otherwise), so the synthetic events
// cannot drift from the stream's format.

// templates holds one real event of each type the page reads.
type templates struct {
	cmd, native, pool, group map[string]any
}

// realTemplates reads one frame of a real stream: a registry with a pool
// group that ran a call.
func realTemplates(t testing.TB) templates {
	t.Helper()
	reg := command.NewRegistry(command.RegistryConfig{Clock: &metrics.ManualClock{}, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("tpl", command.GroupConfig{MaxConcurrent: 2})
	require.NoError(t, err)
	_, err = command.Execute(context.Background(), g, command.Func("Tpl", func(context.Context) (int, error) { return 1, nil }, nil))
	require.NoError(t, err)
	h, err := dashboard.New(reg, dashboard.Config{})
	require.NoError(t, err)
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer func() { require.NoError(t, h.Close(context.Background())) }()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+dashboard.StreamPath+"?delay=100", nil)
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	byType := map[string]map[string]any{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for len(byType) < 4 && sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(data), &ev))
		switch typ := ev["type"].(string); typ {
		case dashboard.TypeHystrixCommand, dashboard.TypeBulwarkCommand, dashboard.TypeHystrixThreadPool, dashboard.TypeBulwarkGroup:
			byType[typ] = ev
		}
	}
	require.Len(t, byType, 4, "one event of each type in the first frame (read error: %v)", sc.Err())
	return templates{
		cmd: byType[dashboard.TypeHystrixCommand], native: byType[dashboard.TypeBulwarkCommand],
		pool: byType[dashboard.TypeHystrixThreadPool], group: byType[dashboard.TypeBulwarkGroup],
	}
}

// event is a copy of a template whose fields set changes.
type event struct {
	t testing.TB
	m map[string]any
}

func (tp templates) event(t testing.TB, tmpl map[string]any) event {
	m := maps.Clone(tmpl)
	for k, v := range m {
		if inner, ok := v.(map[string]any); ok {
			m[k] = maps.Clone(inner)
		}
	}
	return event{t: t, m: m}
}

// set sets key (a nested one as "latencyExecute.99") to v; the template
// must have the key.
func (e event) set(key string, v any) event {
	e.t.Helper()
	m := e.m
	if outer, inner, ok := strings.Cut(key, "."); ok {
		sub, isMap := m[outer].(map[string]any)
		require.True(e.t, isMap, "the stream's %s event has no object %q", e.m["type"], outer)
		m, key = sub, inner
	}
	_, ok := m[key]
	require.True(e.t, ok, "the stream's %s event has no key %q", e.m["type"], key)
	m[key] = v
	return e
}

// synthStream serves the page and a stream whose frames frame builds.
type synthStream struct {
	URL string // the page

	history func(now time.Time) []byte // sent once to each new client
	frame   func(now time.Time) []byte // sent every interval

	mu   sync.Mutex
	done chan struct{}
}

// encodeEvents encodes evs as the data lines of one frame, and its ping.
func encodeEvents(evs []map[string]any) []byte {
	var b bytes.Buffer
	for _, ev := range evs {
		data, err := json.Marshal(ev)
		if err != nil {
			panic(err) // maps of JSON values: cannot fail
		}
		b.WriteString("data: ")
		b.Write(data)
		b.WriteString("\n\n")
	}
	b.WriteString("ping: \n\n")
	return b.Bytes()
}

// serveSynth serves the dashboard page at / and at /hystrix.stream what
// history returns (once per client, nil for nothing) and what frame
// returns (every interval) until the test ends.
func serveSynth(t testing.TB, interval time.Duration, history, frame func(now time.Time) []byte) *synthStream {
	t.Helper()
	s := &synthStream{history: history, frame: frame, done: make(chan struct{})}
	page, err := dashboard.NewPage(dashboard.PageConfig{StreamURL: dashboard.StreamPath[1:]})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/", page)
	mux.HandleFunc(dashboard.StreamPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream;charset=UTF-8")
		w.Header().Set("Cache-Control", "no-cache")
		flusher := w.(http.Flusher)
		write := func(data []byte) bool {
			if _, err := w.Write(data); err != nil {
				return false
			}
			flusher.Flush()
			return true
		}
		if s.history != nil && !write(s.history(time.Now())) {
			return
		}
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			s.mu.Lock()
			data := s.frame(time.Now())
			s.mu.Unlock()
			if !write(data) {
				return
			}
			select {
			case <-tick.C:
			case <-r.Context().Done():
				return
			case <-s.done:
				return
			}
		}
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(func() {
		close(s.done)
		ts.Close()
	})
	s.URL = ts.URL + "/"
	return s
}

// change runs f between two frames: for a test that changes what the
// frames say.
func (s *synthStream) change(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// synthCmd describes one command of a synthetic frame.
type synthCmd struct {
	group, name string
	strategy    string // "THREAD" or "SEMAPHORE"

	// The window's counts.
	success, failure, timeout, rejected, shortCircuited, badRequest, fallback, cancelled, rateLimited, retried int64
	errPct                                                                                                     float64  // of the breaker's requests
	latency                                                                                                    [5]int64 // p50, p90, p99, p99.5, max in ms
	mean                                                                                                       int64
	timeoutMs, slowMs                                                                                          int64
	slowRatio, degraded                                                                                        float64
	inFlight, detached                                                                                         int64
	hosts                                                                                                      int64

	// The breakers.
	state, mode, reason, shared          string
	groupState, groupMode                string
	sinceMs, retryAfterMs, openMs        int64
	probes, probeOK, probesNeeded        int
	rampShare                            float64
	tripAgoMs                            int64 // > 0: a transition closed → open that long ago
	warmUpLeftMs                         int64
	healthCheck, alertTier               string
	degradedAlarm                        bool
	probeCount, probeSuccess, probeFails int64
	breakerOff                           bool // observe-only: no short circuits
}

// events returns the HystrixCommand and BulwarkCommand events of c at now.
func (tp templates) commandEvents(t testing.TB, now time.Time, c synthCmd) []map[string]any {
	t.Helper()
	hosts := max(c.hosts, 1)
	window := int64(10000)
	requests := c.success + c.failure + c.timeout
	h := tp.event(t, tp.cmd).
		set("name", c.name).set("group", c.group).set("currentTime", now.UnixMilli()).
		set("isCircuitBreakerOpen", c.state == "open" || c.state == "half-open" || c.mode == "forced-open" || c.groupState == "open").
		set("errorPercentage", int64(c.errPct)*hosts).
		set("errorCount", c.failure+c.timeout).set("requestCount", requests).
		set("rollingCountSuccess", c.success).set("rollingCountFailure", c.failure).
		set("rollingCountTimeout", c.timeout).set("rollingCountBadRequests", c.badRequest).
		set("rollingCountShortCircuited", c.shortCircuited).
		set("rollingCountThreadPoolRejected", c.rejected).set("rollingCountSemaphoreRejected", c.rateLimited).
		set("rollingCountFallbackSuccess", c.fallback).
		set("rollingCountFallbackMissing", max(0, c.failure+c.timeout+c.rejected+c.shortCircuited-c.fallback)).
		set("currentConcurrentExecutionCount", c.inFlight).
		set("latencyExecute_mean", c.mean*hosts).
		set("latencyExecute.50", c.latency[0]*hosts).set("latencyExecute.90", c.latency[1]*hosts).
		set("latencyExecute.99", c.latency[2]*hosts).set("latencyExecute.99.5", c.latency[3]*hosts).
		set("latencyExecute.100", c.latency[4]).
		set("propertyValue_circuitBreakerEnabled", !c.breakerOff).
		set("propertyValue_circuitBreakerForceOpen", c.mode == "forced-open").
		set("propertyValue_circuitBreakerForceClosed", c.mode == "forced-closed").
		set("propertyValue_executionIsolationStrategy", c.strategy).
		set("propertyValue_executionTimeoutInMilliseconds", c.timeoutMs).
		set("propertyValue_metricsRollingStatisticalWindowInMilliseconds", window*hosts).
		set("reportingHosts", hosts).set("threadPool", c.group)

	var transitions []any
	if c.tripAgoMs > 0 {
		transitions = append(transitions, map[string]any{
			"from": "closed", "to": "open", "reason": c.reason, "at": now.UnixMilli() - c.tripAgoMs,
			"requests": requests, "errorRatio": c.errPct / 100, "slowRatio": 0, "openDurationMs": c.openMs,
		})
	}
	mode := c.mode
	if mode == "" {
		mode = "normal"
	}
	state := c.state
	if state == "" {
		state = "closed"
	}
	groupState, groupMode := c.groupState, c.groupMode
	if groupState == "" {
		groupState = "closed"
	}
	if groupMode == "" {
		groupMode = "normal"
	}
	ramp := c.rampShare
	if ramp == 0 {
		ramp = 1
	}
	n := tp.event(t, tp.native).
		set("name", c.name).set("group", c.group).set("currentTime", now.UnixMilli()).
		set("state", state).set("mode", mode).set("reason", c.reason).
		set("timeInStateMs", c.sinceMs).set("openDurationMs", c.openMs).set("retryAfterMs", c.retryAfterMs).
		set("probes", c.probes).set("probeSuccesses", c.probeOK).set("probesNeeded", c.probesNeeded).
		set("rampShare", ramp).set("transitions", transitions).set("shared", c.shared).
		set("warmingUp", c.warmUpLeftMs > 0).set("warmUpLeftMs", c.warmUpLeftMs).
		set("healthCheck", c.healthCheck).
		set("groupState", groupState).set("groupMode", groupMode).
		set("inFlight", c.inFlight).set("detached", c.detached).set("degradedRate", c.degraded).
		set("slowRatio", c.slowRatio).set("slowCallDurationMs", c.slowMs).set("timeoutMs", c.timeoutMs).
		set("rollingCountCancelled", c.cancelled).set("rollingCountRateLimited", c.rateLimited).
		set("rollingCountRetried", c.retried).
		set("rollingCountProbe", c.probeCount).set("rollingCountProbeSuccess", c.probeSuccess).
		set("rollingCountProbeFailure", c.probeFails).
		set("alertTier", c.alertTier).set("degradedAlarm", c.degradedAlarm)
	return []map[string]any{h.m, n.m}
}

// synthGroup describes one group's bulkhead in a synthetic frame.
type synthGroup struct {
	name, strategy                       string
	capacity, queueCapacity              int
	active, queued, detached, largest    int
	completed, rollingRejected, executed int64
	state                                string
	sinceMs                              int64
}

// groupEvents returns the BulwarkGroup event of g and, for a pool, its
// HystrixThreadPool event.
func (tp templates) groupEvents(t testing.TB, now time.Time, g synthGroup) []map[string]any {
	t.Helper()
	state := g.state
	if state == "" {
		state = "closed"
	}
	n := tp.event(t, tp.group).
		set("name", g.name).set("currentTime", now.UnixMilli()).set("strategy", g.strategy).
		set("capacity", g.capacity).set("queueCapacity", g.queueCapacity).
		set("active", g.active).set("queued", g.queued).set("detached", g.detached).
		set("largestActive", g.largest).set("completed", g.completed).
		set("rollingRejected", g.rollingRejected).set("rollingExecuted", g.executed).
		set("state", state).set("timeInStateMs", g.sinceMs).set("transitions", []any{})
	evs := []map[string]any{n.m}
	if g.strategy == "THREAD" {
		p := tp.event(t, tp.pool).
			set("name", g.name).set("currentTime", now.UnixMilli()).
			set("currentActiveCount", g.active).set("currentQueueSize", g.queued).
			set("currentMaximumPoolSize", g.capacity).set("currentPoolSize", g.capacity).
			set("currentCorePoolSize", g.capacity).set("currentLargestPoolSize", g.largest).
			set("currentCompletedTaskCount", g.completed).
			set("rollingCountCommandRejections", g.rollingRejected).set("rollingCountThreadsExecuted", g.executed).
			set("propertyValue_queueSizeRejectionThreshold", g.queueCapacity)
		evs = append(evs, p.m)
	}
	return evs
}

// historyEvent is a BulwarkHistory event: one point per step over span
// before now, rate and errs giving each point's values.
func historyEvent(group, name string, now time.Time, span, step time.Duration, rate, errs func(ago time.Duration) float64) map[string]any {
	var points [][3]float64
	for ago := span; ago >= 0; ago -= step {
		at := now.Add(-ago)
		points = append(points, [3]float64{float64(at.UnixMilli()), rate(ago), errs(ago)})
	}
	return map[string]any{"type": dashboard.TypeBulwarkHistory, "name": name, "group": group,
		"stepMs": step.Milliseconds(), "points": points}
}
