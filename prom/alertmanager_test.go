package prom

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/promtest"
)

// TestAlertmanagerConfigRoutesEachTier: amtool accepts alertmanager.yml and
// routes each severity of alerts.yml to its receiver.
func TestAlertmanagerConfigRoutesEachTier(t *testing.T) {
	amtool := promtest.Tool(t, "amtool")
	out, err := exec.Command(amtool, "check-config", "alertmanager.yml").CombinedOutput()
	require.NoError(t, err, "amtool check-config:\n%s", out)
	for severity, receiver := range map[string]string{"P1": "escalate", "P2": "page", "P3": "record", "": "record"} {
		var stderr bytes.Buffer
		routes := exec.Command(amtool, "config", "routes", "test", "--config.file=alertmanager.yml",
			"alertname=BulwarkCommandCircuitOpen", "severity="+severity)
		routes.Stderr = &stderr // amtool warns there that --config.file wins over --alertmanager.url
		out, err := routes.Output()
		require.NoError(t, err, "amtool config routes test:\n%s%s", out, stderr.String())
		assert.Equal(t, receiver, strings.TrimSpace(string(out)), "severity %q", severity)
	}
}

// notification is the part of an Alertmanager webhook payload the test reads.
type notification struct {
	Receiver string
	Alerts   []struct{ Labels map[string]string }
}

// TestRealAlertmanagerInhibitsLowerTiers: a real Alertmanager running
// alertmanager.yml, sent the P3 and P2 alerts of one outage and the P3
// alert of another, notifies page of the first and record of the second
// only: the first outage's P3 is inhibited by its P2.
func TestRealAlertmanagerInhibitsLowerTiers(t *testing.T) {
	var mu sync.Mutex
	var got []notification
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n notification
		if err := json.NewDecoder(r.Body).Decode(&n); err == nil {
			mu.Lock()
			got = append(got, n)
			mu.Unlock()
		}
	}))
	t.Cleanup(hook.Close)

	raw, err := os.ReadFile("alertmanager.yml")
	require.NoError(t, err)
	// Only the webhook address and the waits change: the routes and the
	// inhibition rules are the shipped ones.
	cfg := strings.NewReplacer("http://127.0.0.1:9095", hook.URL, "group_wait: 30s", "group_wait: 1s").Replace(string(raw))
	require.NotEqual(t, string(raw), cfg)
	am := promtest.Alertmanager(t, cfg)
	client, base := am.Client, am.URL

	alert := func(command, severity string) map[string]any {
		return map[string]any{"labels": map[string]string{"alertname": "BulwarkCommandCircuitOpen",
			"group": "pay", "command": command, "instance": "a:1", "severity": severity}}
	}
	body, err := json.Marshal([]any{alert("charge", "P3"), alert("charge", "P2"), alert("refund", "P3")})
	require.NoError(t, err)
	resp, err := client.Post(base+"/api/v2/alerts", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)

	type sent struct{ receiver, command, severity string }
	seen := func() map[sent]bool {
		mu.Lock()
		defer mu.Unlock()
		s := map[sent]bool{}
		for _, n := range got {
			for _, a := range n.Alerts {
				s[sent{n.Receiver, a.Labels["command"], a.Labels["severity"]}] = true
			}
		}
		return s
	}
	promtest.Eventually(t, 60*time.Second, "both notifications", func() error {
		s := seen()
		if !s[sent{"page", "charge", "P2"}] || !s[sent{"record", "refund", "P3"}] {
			return fmt.Errorf("notified so far: %v", s)
		}
		return nil
	})
	// Alertmanager says which alerts it holds back, and by which.
	resp, err = client.Get(base + "/api/v2/alerts")
	require.NoError(t, err)
	var held []struct {
		Labels map[string]string
		Status struct{ InhibitedBy []string }
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&held))
	require.NoError(t, resp.Body.Close())
	inhibited := map[string]bool{}
	for _, a := range held {
		inhibited[a.Labels["command"]+" "+a.Labels["severity"]] = len(a.Status.InhibitedBy) > 0
	}
	assert.Equal(t, map[string]bool{"charge P3": true, "charge P2": false, "refund P3": false}, inhibited)
	assert.Equal(t, map[sent]bool{{"page", "charge", "P2"}: true, {"record", "refund", "P3"}: true}, seen(),
		"charge's P3 is inhibited by its P2")
}
