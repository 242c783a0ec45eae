package prom

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/promtest"
)

// promtool runs promtool with args in this directory and fails the test
// with its output if it fails.
func promtool(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(promtest.Tool(t, "promtool"), args...).CombinedOutput()
	require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
}

// TestAlertRules: promtool accepts alerts.yml, and its unit tests
// (alerts_test.yml: breaker not closed for over 1 minute, through
// open/half-open flips; degraded ratio over 5%) pass.
func TestAlertRules(t *testing.T) {
	promtool(t, "check", "rules", "alerts.yml")
	promtool(t, "test", "rules", "alerts_test.yml")
}

// TestDemoPrometheusConfig: the demo's prometheus.yml, which loads
// alerts.yml, is a valid config.
func TestDemoPrometheusConfig(t *testing.T) {
	promtool(t, "check", "config", "examples/dashboard/prometheus.yml")
}

var metricName = regexp.MustCompile(`bulwark_[a-z_]+`)

// exported returns the names of the metric families the collector exports
// for the test service (which has every kind of series).
func exported(t *testing.T) map[string]bool {
	t.Helper()
	c, err := New(service(t))
	require.NoError(t, err)
	names := map[string]bool{}
	for name, f := range scrape(t, c) {
		names[name] = true
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			for _, series := range []string{"_bucket", "_count", "_sum"} {
				names[name+series] = true
			}
		case dto.MetricType_SUMMARY:
			for _, series := range []string{"_count", "_sum"} {
				names[name+series] = true
			}
		}
	}
	return names
}

// TestAlertRulesUseExportedMetrics: every bulwark metric alerts.yml names
// is one the collector exports (a renamed metric would silence an alert).
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	rules, err := os.ReadFile("alerts.yml")
	require.NoError(t, err)
	names := exported(t)
	used := metricName.FindAllString(string(rules), -1)
	require.NotEmpty(t, used)
	for _, n := range used {
		assert.True(t, names[n], "alerts.yml uses %s, which the collector does not export", n)
	}
}

// panelQuery is one query of a panel of the Grafana dashboard.
type panelQuery struct{ panel, expr string }

// dashboardQueries returns the queries of grafana/bulwark.json, with
// Grafana's variables replaced by values Prometheus accepts.
func dashboardQueries(t *testing.T) []panelQuery {
	t.Helper()
	raw, err := os.ReadFile("grafana/bulwark.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	vars := strings.NewReplacer("$__rate_interval", "1m", "$group", ".*", "$command", ".*")
	var qs []panelQuery
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			qs = append(qs, panelQuery{p.Title, vars.Replace(target.Expr)})
		}
	}
	require.NotEmpty(t, qs, "the dashboard has queries")
	return qs
}

// TestGrafanaDashboard: grafana/bulwark.json is valid JSON whose every
// query parses (promtool checks each as a recording rule) and names only
// metrics the collector exports. TestRealPrometheusScrapesTheCollector
// runs them against real data.
func TestGrafanaDashboard(t *testing.T) {
	names := exported(t)
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, q := range dashboardQueries(t) {
		for _, m := range metricName.FindAllString(q.expr, -1) {
			assert.True(t, names[m], "panel %q uses %s, which the collector does not export", q.panel, m)
		}
		expr, err := json.Marshal(q.expr) // a JSON string is a YAML string
		require.NoError(t, err)
		fmt.Fprintf(&rules, "      - record: panel_%d\n        expr: %s\n", i, expr)
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	require.NoError(t, os.WriteFile(file, []byte(rules.String()), 0o600))
	promtool(t, "check", "rules", file)
}
