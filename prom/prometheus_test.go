package prom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/internal/promtest"
)

// promServer is a real prometheus process scraping one target every second.
type promServer struct{ *promtest.Server }

// startPrometheus runs the prometheus binary on a free loopback port with a
// fresh data directory, scraping target (host:port, path /metrics) every
// second, waits until it is ready, and stops it (and removes the directory)
// when t ends.
func startPrometheus(t *testing.T, target string) *promServer {
	t.Helper()
	bin := promtest.Tool(t, "prometheus")
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
scrape_configs:
  - job_name: bulwark
    static_configs:
      - targets: [%q]
`, target)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(cfg), 0o600))
	return &promServer{promtest.Start(t, bin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "data"))}
}

// sample is one value of a query result.
type sample struct {
	Metric map[string]string
	Value  [2]any   // instant vector: [unix seconds, "value"]
	Values [][2]any // range vector (matrix)
}

// query runs an instant query at time at (the server's now when zero)
// through the HTTP API.
func (p *promServer) query(q string, at float64) ([]sample, error) {
	v := url.Values{"query": {q}}
	if at != 0 {
		v.Set("time", strconv.FormatFloat(at, 'f', -1, 64))
	}
	resp, err := p.Client.Get(p.URL + "/api/v1/query?" + v.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Status, Error string
		Data          struct{ Result []sample }
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("query %s: %w: %s", q, err, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", q, r.Error)
	}
	return r.Data.Result, nil
}

// scalar runs q and returns the value of its only series.
func (p *promServer) scalar(q string, at float64) (float64, error) {
	res, err := p.query(q, at)
	if err != nil {
		return 0, err
	}
	if len(res) != 1 {
		return 0, fmt.Errorf("query %s: %d series, want 1: %v", q, len(res), res)
	}
	return pointValue(res[0].Value)
}

// pointValue reads the value of a [time, "value"] pair.
func pointValue(p [2]any) (float64, error) {
	s, ok := p[1].(string)
	if !ok {
		return 0, fmt.Errorf("value %v is not a string", p[1])
	}
	return strconv.ParseFloat(s, 64)
}

// waitValue waits until q's only series has value want.
func (p *promServer) waitValue(t *testing.T, q string, want float64) {
	t.Helper()
	promtest.Eventually(t, 60*time.Second, q, func() error {
		v, err := p.scalar(q, 0)
		if err != nil {
			return err
		}
		if v != want {
			return fmt.Errorf("%s = %v, want %v", q, v, want)
		}
		return nil
	})
}

type testCmd struct {
	name string
	err  error
}

func (c testCmd) Name() string                     { return c.name }
func (c testCmd) Run(context.Context) (int, error) { return 1, c.err }

// TestRealPrometheusScrapesTheCollector serves the collector to a real
// Prometheus server scraping every second, drives a service in two phases
// between scrapes and checks, through the query API, the counters, the
// rate Prometheus computes from them and the breakers' states.
func TestRealPrometheusScrapesTheCollector(t *testing.T) {
	if testing.Short() {
		t.Skip("real Prometheus: skipped in -short mode")
	}
	reg := command.NewRegistry(command.RegistryConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	users, err := reg.NewGroup("users", command.GroupConfig{Strategy: command.Semaphore})
	require.NoError(t, err)
	pay, err := reg.NewGroup("pay", command.GroupConfig{Strategy: command.Semaphore,
		CommandBreaker: circuit.Config{MinRequests: 10, FailureRatio: 0.5, OpenDuration: 10 * time.Minute}})
	require.NoError(t, err)
	c, err := New(reg)
	require.NoError(t, err)
	pr := prometheus.NewRegistry()
	require.NoError(t, pr.Register(c))
	// A scrape and a phase of calls exclude each other, so that every
	// scrape sees a phase whole.
	var phase sync.RWMutex
	metricsHandler := promhttp.HandlerFor(pr, promhttp.HandlerOpts{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		phase.RLock()
		defer phase.RUnlock()
		metricsHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	ctx := context.Background()
	calls := func(g *command.Group, name string, n int, err error) {
		phase.Lock()
		defer phase.Unlock()
		for range n {
			_, _ = command.Execute(ctx, g, testCmd{name: name, err: err})
		}
	}
	// Phase 1: 40 good calls; 10 failed charges open pay/charge's breaker,
	// and the 5 charges after it are short-circuited.
	calls(users, "get", 40, nil)
	calls(pay, "charge", 15, errors.New("declined"))

	p := startPrometheus(t, srv.Listener.Addr().String())
	getCalls := `bulwark_command_calls_total{job="bulwark",group="users",command="get"}`
	p.waitValue(t, getCalls, 40)
	// Phase 2, after a scrape saw phase 1: 60 more good calls.
	calls(users, "get", 60, nil)
	p.waitValue(t, getCalls, 100)

	// The rate over the two scrapes around phase 2 is its 60 calls over
	// the time between them: irate at the first sample holding 100 uses
	// exactly that sample and the one before it (the timestamps, seconds
	// as float64 in the API, carry a relative error of about 1e-7).
	res, err := p.query(getCalls+"[5m]", 0)
	require.NoError(t, err)
	require.Len(t, res, 1)
	var t40, t100 float64
	for _, pt := range res[0].Values {
		v, err := pointValue(pt)
		require.NoError(t, err)
		ts := pt[0].(float64)
		if v == 40 {
			t40 = ts
		}
		if v == 100 {
			t100 = ts
			break
		}
	}
	require.NotZero(t, t40, "a scrape saw 40 calls")
	require.NotZero(t, t100, "a scrape saw 100 calls")
	rate, err := p.scalar("irate("+getCalls+"[5m])", t100)
	require.NoError(t, err)
	assert.InEpsilon(t, 60/(t100-t40), rate, 1e-4, "60 calls between the scrapes at %v and %v", t40, t100)

	for q, want := range map[string]float64{
		`bulwark_command_events_total{group="users",command="get",event="success"}`:          100,
		`bulwark_command_events_total{group="pay",command="charge",event="failure"}`:         10,
		`bulwark_command_events_total{group="pay",command="charge",event="short_circuited"}`: 5,
		`bulwark_command_calls_total{group="pay",command="charge"}`:                          15,
		`bulwark_command_circuit_state{group="pay",command="charge",state="open"}`:           1,
		`bulwark_command_circuit_state{group="users",command="get",state="closed"}`:          1,
		`bulwark_group_circuit_state{group="pay",state="closed"}`:                            1,
		`bulwark_bulkhead_capacity{group="users"}`:                                           10,
		`up{job="bulwark"}`: 1,
		`bulwark_command_latency_window_seconds_count{group="users",command="get",phase="total"}`: 100,
	} {
		v, err := p.scalar(q, 0)
		if assert.NoError(t, err, q) {
			assert.Equal(t, want, v, q)
		}
	}

	// Every query of the Grafana dashboard runs on this data and finds
	// series (label matching is checked only here, not by promtool: a
	// query naming a label or value the scrape lacks comes back empty),
	// and its breaker state timeline reads pay/charge as open (2).
	sawState := false
	for _, q := range dashboardQueries(t) {
		res, err := p.query(q.expr, 0)
		if !assert.NoError(t, err, "panel %q", q.panel) {
			continue
		}
		assert.NotEmpty(t, res, "panel %q: %s finds no series in a live scrape", q.panel, q.expr)
		if q.panel == "Error %" || q.panel == "Degraded %" {
			var cmds []string
			for _, r := range res {
				cmds = append(cmds, r.Metric["command"])
			}
			assert.ElementsMatch(t, []string{"get", "charge"}, cmds,
				"panel %q: a command with no such event reads 0%%, not no data", q.panel)
		}
		if q.panel != "Breaker state" {
			continue
		}
		for _, r := range res {
			if r.Metric["command"] == "charge" {
				sawState = true
				v, err := pointValue(r.Value)
				require.NoError(t, err)
				assert.Equal(t, 2.0, v, "the dashboard's breaker state of pay/charge")
			}
		}
	}
	assert.True(t, sawState, "the dashboard's breaker state panel shows pay/charge")
}
