package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain fails the run if the demo leaves a goroutine behind (the ants
// package's own default pool, started when it loads, excepted).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

var urlLine = regexp.MustCompile(`bulwark dashboard: (http://\S+/) +\(metrics: (http://\S+)\)`)

// TestDemoServesMetricsAndDashboard runs the demo on a free port, scrapes
// /metrics until every command has calls (parsed by the official text
// parser), loads the page, and stops it with its context.
func TestDemoServesMetricsAndDashboard(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"-addr", "127.0.0.1:0"}, pw)
		pw.Close()
		done <- err
	}()
	urls := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := urlLine.FindStringSubmatch(sc.Text()); m != nil && len(urls) == 0 {
				urls <- m[1:]
			}
		}
	}()
	var page, metricsURL string
	select {
	case u := <-urls:
		page, metricsURL = u[0], u[1]
	case err := <-done:
		t.Fatalf("demo ended before serving: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("demo printed no URL within 10 s")
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	resp, err := client.Get(page)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the dashboard page")

	want := []string{"GetUser", "CheckStock", "ForUser"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(metricsURL)
		require.NoError(t, err)
		parser := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		require.NoError(t, err, "the exposition parses")
		seen := map[string]bool{}
		for _, m := range fams["bulwark_command_calls_total"].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "command" && m.GetCounter().GetValue() > 0 {
					seen[l.GetValue()] = true
				}
			}
		}
		if len(seen) == len(want) {
			for _, c := range want {
				assert.True(t, seen[c], c)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s, calls only for %v", seen)
		}
		time.Sleep(100 * time.Millisecond)
	}

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("demo still running 20 s after its context ended")
	}
}
