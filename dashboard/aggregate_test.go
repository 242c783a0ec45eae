package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// instance is one service of the fleet: a real registry (on a manual
// clock, so its window's counts stay put) served by a real stream.
type instance struct {
	t    *testing.T
	reg  *command.Registry
	api  *command.Group
	h    *Handler
	ts   *httptest.Server
	addr string
}

var quietLog = slog.New(slog.DiscardHandler)

func startInstance(t *testing.T) *instance {
	t.Helper()
	reg := command.NewRegistry(command.RegistryConfig{Clock: &metrics.ManualClock{}, Logger: quietLog})
	api, err := reg.NewGroup("api", command.GroupConfig{MaxConcurrent: 4})
	require.NoError(t, err)
	in := &instance{t: t, reg: reg, api: api}
	in.serve("127.0.0.1:0")
	t.Cleanup(func() {
		in.kill()
		require.NoError(t, reg.Close(context.Background()))
	})
	return in
}

// serve serves the instance's stream on addr (its old address on restart).
func (in *instance) serve(addr string) {
	h, err := New(in.reg, Config{Interval: 50 * time.Millisecond, MinInterval: 10 * time.Millisecond, Logger: quietLog})
	require.NoError(in.t, err)
	ln, err := net.Listen("tcp", addr)
	require.NoError(in.t, err)
	in.h = h
	in.ts = httptest.NewUnstartedServer(h)
	in.ts.Listener = ln
	in.ts.Start()
	in.addr = ln.Addr().String()
}

// kill stops serving: the stream's connections end as in a crash.
func (in *instance) kill() {
	if in.ts == nil {
		return
	}
	require.NoError(in.t, in.h.Close(context.Background()))
	in.ts.Close()
	in.ts = nil
}

func (in *instance) url() string { return "http://" + in.addr + StreamPath }

// call runs ok successes and bad failures of command "Get".
func (in *instance) call(ok, bad int) {
	in.t.Helper()
	for i := range ok + bad {
		fail := i >= ok
		_, _ = command.Execute(context.Background(), in.api, command.Func("Get", func(context.Context) (int, error) {
			if fail {
				return 0, errors.New("down")
			}
			return 1, nil
		}, nil))
	}
}

// own returns the instance's own counts of Get, from its registry.
func (in *instance) own() metrics.Counts {
	for _, g := range in.reg.Snapshot().Groups {
		for _, c := range g.Commands {
			if c.Name == "Get" {
				return c.Metrics.Counts
			}
		}
	}
	return metrics.Counts{}
}

func sumOwn(ins ...*instance) (ok, bad int64) {
	for _, in := range ins {
		c := in.own()
		ok += c[metrics.Success]
		bad += c[metrics.Failure]
	}
	return ok, bad
}

func number(t *testing.T, e map[string]any, key string) int64 {
	t.Helper()
	n, ok := e[key].(json.Number)
	require.True(t, ok, "%s is a number: %v", key, e[key])
	v, err := n.Int64()
	require.NoError(t, err, key)
	return v
}

// waitTotals reads merged frames until Get's totals are hosts, ok and bad,
// and returns that frame; it fails after within.
func waitTotals(t *testing.T, c *streamConn, within time.Duration, hosts, ok, bad int64) sseFrame {
	t.Helper()
	deadline := time.Now().Add(within)
	var last map[string]any
	for time.Now().Before(deadline) {
		f, err := c.sse.frame()
		require.NoError(t, err)
		e := f.find(TypeHystrixCommand, "Get", "api")
		if e == nil {
			continue
		}
		last = e
		if number(t, e, "reportingHosts") == hosts && number(t, e, "rollingCountSuccess") == ok &&
			number(t, e, "rollingCountFailure") == bad {
			return f
		}
	}
	t.Fatalf("totals not %d hosts, %d ok, %d failed within %v; last %v", hosts, ok, bad, within, last)
	return sseFrame{}
}

// TestAggregateSumsThreeInstancesAndRidesOutAKill: three real instances,
// merged; the totals are the sum of the instances' own counts; a killed
// instance leaves the totals at once, and counts again once restarted.
func TestAggregateSumsThreeInstancesAndRidesOutAKill(t *testing.T) {
	ins := []*instance{startInstance(t), startInstance(t), startInstance(t)}
	ins[0].call(7, 1)
	ins[1].call(5, 25) // past MinRequests and the ratio: its breaker opens
	ins[2].call(11, 2)

	const reconnectMax = 300 * time.Millisecond
	agg, err := NewAggregate(AggregateConfig{
		Instances:    []string{ins[0].url(), ins[1].url(), ins[2].url()},
		ReconnectMin: 50 * time.Millisecond, ReconnectMax: reconnectMax,
		StaleAfter: 2 * time.Second,
		Stream:     Config{Interval: 50 * time.Millisecond, MinInterval: 10 * time.Millisecond, Logger: quietLog},
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, agg.Close(context.Background())) }()
	ts := httptest.NewServer(agg)
	defer ts.Close()
	c := openStream(t, newTestClient(), ts.URL+StreamPath)
	defer c.Close()

	ok, bad := sumOwn(ins...)
	require.Equal(t, int64(23), ok)
	f := waitTotals(t, c, 10*time.Second, 3, ok, bad)
	e := f.find(TypeHystrixCommand, "Get", "api")
	assert.Equal(t, true, e["isCircuitBreakerOpen"], "open on one instance: the worst state wins")
	assert.Equal(t, bad, number(t, e, "errorCount"))
	assert.Equal(t, ok+bad, number(t, e, "requestCount"))
	assert.Equal(t, 3*(100*bad/(ok+bad)), number(t, e, "errorPercentage"), "fleet error %, times the hosts the dashboard divides by")
	assert.Equal(t, int64(3*10000), number(t, e, "propertyValue_metricsRollingStatisticalWindowInMilliseconds"))
	pool := f.find(TypeHystrixThreadPool, "api", "")
	require.NotNil(t, pool)
	assert.Equal(t, int64(3), number(t, pool, "reportingHosts"))
	assert.Equal(t, int64(3*4), number(t, pool, "currentPoolSize"), "fleet capacity")
	native := f.find(TypeBulwarkCommand, "Get", "api")
	require.NotNil(t, native)
	assert.Equal(t, "open", native["state"], "the breaker fields of the worst instance")
	assert.Equal(t, 3, agg.Hosts())

	// More calls on one instance: the totals follow within a frame or two.
	ins[0].call(4, 0)
	ok, bad = sumOwn(ins...)
	waitTotals(t, c, 5*time.Second, 3, ok, bad)

	// Kill one: it leaves the totals within one reconnect interval.
	ins[2].kill()
	killed := time.Now()
	ok, bad = sumOwn(ins[0], ins[1])
	waitTotals(t, c, 5*time.Second, 2, ok, bad)
	assert.Less(t, time.Since(killed), reconnectMax+time.Second, "gone from the totals within a reconnect interval (and a frame)")

	// Restart it on its address: it counts again once reconnected.
	ins[2].serve(ins[2].addr)
	ok, bad = sumOwn(ins...)
	waitTotals(t, c, 10*time.Second, 3, ok, bad)
}

// The merged stream speaks Hystrix's dialect: every required key of both
// event types is there with its type, so the Hystrix Dashboard shows it.
func TestAggregateKeepsEveryHystrixKey(t *testing.T) {
	a, b := startInstance(t), startInstance(t)
	a.call(3, 0)
	b.call(2, 1)
	agg, err := NewAggregate(AggregateConfig{
		Instances: []string{a.url(), b.url()},
		Stream:    Config{Interval: 50 * time.Millisecond, MinInterval: 10 * time.Millisecond, Logger: quietLog},
	})
	require.NoError(t, err)
	defer agg.Close(context.Background())
	ts := httptest.NewServer(agg)
	defer ts.Close()
	c := openStream(t, newTestClient(), ts.URL+StreamPath)
	defer c.Close()
	f := waitTotals(t, c, 10*time.Second, 2, 5, 1)
	checkKinds(t, f.find(TypeHystrixCommand, "Get", "api"), hystrixCommandKeys)
	checkKinds(t, f.find(TypeHystrixThreadPool, "api", ""), hystrixThreadPoolKeys)
}

// checkKinds checks that e has exactly the keys of want, each of its kind.
func checkKinds(t *testing.T, e map[string]any, want map[string]string) {
	t.Helper()
	require.NotNil(t, e)
	assert.Len(t, e, len(want))
	for k, kind := range want {
		assert.True(t, kindOK(kind, e[k]), "%s: %v is not %s", k, e[k], kind)
	}
}

// Discovery: the aggregate follows what Discover returns, adding and
// dropping instances, and keeps the last answer when a call fails.
func TestAggregateFollowsDiscovery(t *testing.T) {
	a, b := startInstance(t), startInstance(t)
	urls := make(chan []string, 1)
	urls <- []string{a.url()}
	discover := func(context.Context) ([]string, error) {
		select {
		case u := <-urls:
			return u, nil
		default:
			return nil, errors.New("registry unreachable")
		}
	}
	agg, err := NewAggregate(AggregateConfig{
		Discover: discover, DiscoverInterval: 20 * time.Millisecond,
		Stream: Config{Logger: quietLog},
	})
	require.NoError(t, err)
	defer agg.Close(context.Background())
	require.Eventually(t, func() bool { return agg.Hosts() == 1 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []string{a.url()}, agg.Instances())
	urls <- []string{b.url(), a.url()}
	require.Eventually(t, func() bool { return agg.Hosts() == 2 }, 10*time.Second, 10*time.Millisecond)
	urls <- []string{b.url()}
	require.Eventually(t, func() bool { return len(agg.Instances()) == 1 }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // a few failed Discover calls
	assert.Equal(t, []string{b.url()}, agg.Instances(), "a failing Discover keeps the last answer")
}

func TestAggregateConfigValidated(t *testing.T) {
	for _, cfg := range []AggregateConfig{
		{},
		{Instances: []string{"not a url"}},
		{Instances: []string{"ftp://x/hystrix.stream"}},
		{Instances: []string{"http://x/"}, ReconnectMin: time.Second, ReconnectMax: time.Millisecond},
		{Instances: []string{"http://x/"}, StaleAfter: -1},
		{Instances: []string{"http://x/"}, Client: &http.Client{Timeout: time.Second}},
		{Instances: []string{"http://x/"}, Stream: Config{MaxClients: -1}},
	} {
		_, err := NewAggregate(cfg)
		assert.ErrorIs(t, err, ErrInvalidConfig, "%+v", cfg)
	}
}

// TestAggregateRefusesControl: the aggregate has no control endpoint, so a
// control endpoint is a mistake to report, not a setting to ignore.
func TestAggregateRefusesControl(t *testing.T) {
	agg, err := NewAggregate(AggregateConfig{Instances: []string{"http://x/hystrix.stream"},
		Stream: Config{Logger: quietLog, Control: http.NotFoundHandler()}})
	if agg != nil {
		require.NoError(t, agg.Close(context.Background()))
	}
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.ErrorContains(t, err, "Stream.Control is set, but the aggregate has no control endpoint")
}

// The merged stream keeps a history like any stream: a new client gets one
// BulwarkHistory event per merged command, its rates those of the fleet
// over one instance's window (not the window times reportingHosts that the
// merged event carries for the Hystrix Dashboard).
func TestAggregateHistoryHasFleetRates(t *testing.T) {
	a, b := startInstance(t), startInstance(t)
	a.call(3, 0)
	b.call(2, 1)
	agg, err := NewAggregate(AggregateConfig{
		Instances: []string{a.url(), b.url()},
		Stream: Config{Interval: 50 * time.Millisecond, MinInterval: 10 * time.Millisecond, Logger: quietLog,
			History: 10 * time.Second, HistoryStep: 10 * time.Millisecond},
	})
	require.NoError(t, err)
	defer agg.Close(context.Background())
	ts := httptest.NewServer(agg)
	defer ts.Close()
	c := openStream(t, newTestClient(), ts.URL+StreamPath)
	waitTotals(t, c, 10*time.Second, 2, 5, 1)
	for range 3 { // frames built after the totals, each recording a point
		_, err = c.sse.frame()
		require.NoError(t, err)
	}
	c.Close()

	second := openStream(t, newTestClient(), ts.URL+StreamPath)
	defer second.Close()
	f, err := second.sse.frame()
	require.NoError(t, err)
	h := f.find(TypeBulwarkHistory, "Get", "api")
	require.NotNil(t, h, "history of the merged command")
	points := h["points"].([]any)
	require.NotEmpty(t, points)
	newest := points[len(points)-1].([]any)
	rate, _ := newest[1].(json.Number).Float64()
	errs, _ := newest[2].(json.Number).Float64()
	assert.InDelta(t, 6/10.0, rate, 0.001, "6 calls in the fleet over a 10 s window")
	assert.InDelta(t, 1/10.0, errs, 0.001, "1 failure over a 10 s window")
}

// An aggregate answers every request the way the handler of New does
// (without a control endpoint): the same page, the same assets, the same
// refusals, and the stream at any path ending in StreamPath.
func TestAggregateRoutesAsHandler(t *testing.T) {
	h, err := New(&fakeSource{snap: sampleSnapshot()}, Config{Logger: quietLog})
	require.NoError(t, err)
	defer h.Close(context.Background())
	agg, err := NewAggregate(AggregateConfig{
		Discover: func(context.Context) ([]string, error) { return nil, nil },
		Stream:   Config{Logger: quietLog},
	})
	require.NoError(t, err)
	defer agg.Close(context.Background())

	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/", http.StatusOK},
		{http.MethodGet, "/ops/", http.StatusOK},
		{http.MethodGet, "/index.html", http.StatusOK},
		{http.MethodHead, "/", http.StatusOK},
		{http.MethodGet, "/app.js", http.StatusOK},
		{http.MethodGet, "/ops/style.css", http.StatusOK},
		{http.MethodGet, "/secret.txt", http.StatusNotFound},
		{http.MethodGet, "/control", http.StatusNotFound},
		{http.MethodPost, "/control", http.StatusMethodNotAllowed},
		{http.MethodPost, "/", http.StatusMethodNotAllowed},
		{http.MethodPost, StreamPath, http.StatusMethodNotAllowed},
		{http.MethodGet, "/ops" + StreamPath + "?delay=soon", http.StatusBadRequest},
	} {
		want, got := httptest.NewRecorder(), httptest.NewRecorder()
		h.ServeHTTP(want, httptest.NewRequest(tc.method, tc.path, nil))
		agg.ServeHTTP(got, httptest.NewRequest(tc.method, tc.path, nil))
		name := tc.method + " " + tc.path
		assert.Equal(t, tc.status, want.Code, name)
		assert.Equal(t, want.Code, got.Code, name)
		for _, k := range []string{"Content-Type", "Allow", "ETag", "Content-Security-Policy"} {
			assert.Equal(t, want.Header().Get(k), got.Header().Get(k), "%s: %s", name, k)
		}
		assert.Equal(t, want.Body.String(), got.Body.String(), name)
	}
}
