package prom

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/internal/promtest"
	"github.com/bulwark-go/bulwark/metrics"
)

// serveMetrics serves src's collector as a /metrics endpoint would (the
// default promhttp options: an error answers 500) and returns the body of
// one scrape, failing the test unless it answered 200.
func serveMetrics(t *testing.T, src Source, opts ...Option) string {
	t.Helper()
	c, err := New(src, opts...)
	require.NoError(t, err)
	pr := prometheus.NewRegistry()
	require.NoError(t, pr.Register(c))
	srv := httptest.NewServer(promhttp.HandlerFor(pr, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	return string(body)
}

// TestInvalidUTF8NameDoesNotBreakTheScrape: one command name that is not
// valid UTF-8 made the collector panic in MustNewConstMetric, and the
// whole scrape failed. The registry renames such a name once (valid, and
// apart from every other), counts it, and the scrape answers every series.
func TestInvalidUTF8NameDoesNotBreakTheScrape(t *testing.T) {
	reg := command.NewRegistry(command.RegistryConfig{Clock: new(metrics.ManualClock), Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	users, err := reg.NewGroup("users", command.GroupConfig{Strategy: command.Semaphore})
	require.NoError(t, err)
	for _, name := range []string{"get", "caf\xe9", "caf\xe8"} {
		_, err := command.Execute(context.Background(), users, testCmd{name: name})
		require.NoError(t, err)
	}
	body := serveMetrics(t, reg)
	assert.Contains(t, body, `bulwark_command_calls_total{command="get",group="users"} 1`)
	assert.Equal(t, 2, strings.Count(body, `bulwark_command_calls_total{command="caf`), "the two names stay apart")
	assert.Contains(t, body, `bulwark_group_renamed_commands{group="users"} 2`)
	assert.Contains(t, body, "bulwark_collector_dropped_series_total 0")
}

// badSource is a Source other than a registry, whose names need not be
// valid.
type badSource struct{ snap command.Snapshot }

func (b badSource) Snapshot() command.Snapshot { return b.snap }

// TestCollectorDropsSeriesItCannotBuild: a series whose label is not valid
// UTF-8 is left out of the scrape and counted; the others are served.
func TestCollectorDropsSeriesItCannotBuild(t *testing.T) {
	src := badSource{command.Snapshot{Groups: []command.GroupSnapshot{
		{Name: "ok", Commands: []command.CommandSnapshot{{Name: "get"}, {Name: "bad\xff"}}},
		{Name: "bad\xfe"},
	}}}
	body := serveMetrics(t, src)
	assert.Contains(t, body, `bulwark_command_calls_total{command="get",group="ok"} 0`)
	assert.Contains(t, body, `bulwark_bulkhead_capacity{group="ok"} 0`)
	assert.NotContains(t, body, `group="bad`)
	assert.NotContains(t, body, `command="bad`)
	assert.NotContains(t, body, "bulwark_collector_dropped_series_total 0")
	body = serveMetrics(t, src)
	assert.Regexp(t, `bulwark_collector_dropped_series_total [1-9]`, body)
}

// TestPromtoolCheckMetricsIsSilent: promtool's linter finds nothing to say
// about a live scrape of a service with every kind of series, lean or in
// detail (it said, of every latency series, `non-summary metrics should
// not have "quantile" label`: the window's quantiles were gauges).
func TestPromtoolCheckMetricsIsSilent(t *testing.T) {
	for _, mode := range []struct {
		name     string
		opts     []Option
		quantile string
	}{{"lean", nil, `quantile="0.99"`}, {"detail", []Option{WithDetail()}, `quantile="0.995"`}} {
		t.Run(mode.name, func(t *testing.T) {
			body := serveMetrics(t, service(t), mode.opts...)
			require.Contains(t, body, mode.quantile)
			cmd := exec.Command(promtest.Tool(t, "promtool"), "check", "metrics")
			cmd.Stdin = strings.NewReader(body)
			var outb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &outb, &outb
			err := cmd.Run()
			assert.Empty(t, outb.String(), "promtool check metrics")
			assert.NoError(t, err, "promtool check metrics")
		})
	}
}
