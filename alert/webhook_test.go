package alert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/internal/logtest"
	"github.com/bulwark-go/bulwark/internal/promtest"
	"github.com/bulwark-go/bulwark/metrics"
)

// receiver is a real HTTP server that takes Alertmanager's POST
// /api/v2/alerts and keeps each request's alerts, answering status(n) to
// the n-th request (1-based; 200 when status is nil).
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	status func(n int) int

	mu    sync.Mutex
	n     int
	posts [][]postable // the alerts of each request answered 2xx
	bad   []string     // what was wrong with a request
}

func newReceiver(t *testing.T, status func(n int) int) *receiver {
	rc := &receiver{t: t, status: status}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.n++
	code := http.StatusOK
	if rc.status != nil {
		code = rc.status(rc.n)
	}
	var problems []string
	if r.Method != http.MethodPost || r.URL.Path != "/api/v2/alerts" {
		problems = append(problems, r.Method+" "+r.URL.Path)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		problems = append(problems, "Content-Type "+ct)
	}
	// The exact keys of the API's PostableAlert: encoding/json would match
	// them case-insensitively.
	var raw []map[string]json.RawMessage
	if err == nil {
		err = json.Unmarshal(body, &raw)
	}
	for _, a := range raw {
		if keys := slices.Sorted(maps.Keys(a)); !slices.Equal(keys, []string{"annotations", "endsAt", "generatorURL", "labels", "startsAt"}) &&
			!slices.Equal(keys, []string{"annotations", "endsAt", "labels", "startsAt"}) {
			problems = append(problems, fmt.Sprintf("keys %v", keys))
		}
	}
	var alerts []postable
	if err == nil {
		err = json.Unmarshal(body, &alerts)
	}
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		rc.bad = append(rc.bad, strings.Join(problems, "; "))
	}
	if code/100 == 2 {
		rc.posts = append(rc.posts, alerts)
	}
	w.WriteHeader(code)
}

// wait returns the posts answered 2xx once there are n of them; it fails
// the test if a request was malformed.
func (rc *receiver) wait(n int) [][]postable {
	rc.t.Helper()
	var posts [][]postable
	require.Eventually(rc.t, func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		posts = slices.Clone(rc.posts)
		return len(posts) >= n
	}, 10*time.Second, time.Millisecond, "%d posts", n)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	require.Empty(rc.t, rc.bad)
	return posts
}

// newWebhook returns the Webhook of cfg, closed when the test ends.
func newWebhook(t *testing.T, cfg WebhookConfig) *Webhook {
	t.Helper()
	h, err := NewWebhook(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Close(ctx)
	})
	return h
}

// webhookGroup returns a group whose command breaker trips on one
// failure and stays open 5 minutes, watched by a Watcher that reads
// request IDs and hands its alerts to h.
func webhookGroup(t *testing.T, h *Webhook) (*command.Group, *Watcher, *metrics.ManualClock) {
	t.Helper()
	w := newWatcher(t, Config{OnAlert: h.OnAlert, Interval: time.Hour, RequestID: requestIDOf})
	g, clock := newTestGroup(t, command.GroupConfig{
		Strategy:       command.Semaphore,
		CommandBreaker: circuit.Config{MinRequests: 1, OpenDuration: 5 * time.Minute, HalfOpenSuccesses: 1},
		Alerts:         w,
	})
	return g, w, clock
}

// waitCounts waits until h's Counts are delivered and failures: the
// receiver has an alert a moment before the webhook counts it.
func waitCounts(t *testing.T, h *Webhook, delivered, failures int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		d, f := h.Counts()
		return d == delivered && f == failures
	}, 10*time.Second, time.Millisecond, "want %d delivered, %d failures", delivered, failures)
}

// within fails the test unless at is in [from, to].
func within(t *testing.T, at, from, to time.Time, what string) {
	t.Helper()
	require.False(t, at.Before(from) || at.After(to), "%s %v not in [%v, %v]", what, at, from, to)
}

// TestWebhookSendsAlertmanagerPayload: an outage's tiers reach a real
// HTTP receiver as Alertmanager's API v2 alerts (labels that route them,
// the action line and the request IDs of the errors in the annotations,
// startsAt at the outage's start, endsAt 4 Resends ahead); its end
// resolves every tier it fired.
func TestWebhookSendsAlertmanagerPayload(t *testing.T) {
	rc := newReceiver(t, nil)
	h := newWebhook(t, WebhookConfig{URL: rc.srv.URL + "/api/v2/alerts", Labels: map[string]string{"instance": "a:1"},
		GeneratorURL: "http://a:1/dashboard", Resend: time.Hour})
	g, w, clock := webhookGroup(t, h)
	_, err := command.Execute(withRequestID("req-42"), g, failing("dep", errRefused))
	require.ErrorIs(t, err, errRefused)

	clock.Advance(time.Minute)
	before := time.Now()
	w.Check()
	after := time.Now()
	p3 := rc.wait(1)[0]
	require.Len(t, p3, 1)
	require.Equal(t, map[string]string{"alertname": "BulwarkCommandCircuitOpen", "group": "deps", "command": "dep",
		"severity": "P3", "instance": "a:1"}, p3[0].Labels)
	require.Equal(t, map[string]string{
		"summary": "Breaker of deps/dep not closed for 1 min",
		"action": "check the health of dependency deps (command dep); breaker open for 1 min, " +
			"reason error_ratio: 1 of 1 calls failed or timed out",
		"errors": "request req-42: dial tcp 10.0.0.7:443: connection refused",
	}, p3[0].Annotations)
	require.Equal(t, "http://a:1/dashboard", p3[0].GeneratorURL)
	within(t, p3[0].StartsAt, before.Add(-time.Minute), after.Add(-time.Minute), "startsAt")
	within(t, p3[0].EndsAt, before.Add(4*time.Hour), after.Add(4*time.Hour), "endsAt")

	clock.Advance(2 * time.Minute) // half-open: a probe fails, the outage goes on
	_, _ = command.Execute(withRequestID("req-43"), g, failing("dep", errRefused))
	clock.Set(10 * time.Minute)
	before = time.Now()
	w.Check()
	after = time.Now()
	p2 := rc.wait(2)[1]
	require.Len(t, p2, 1, "the new tier only: P3 waits for the next Resend")
	require.Equal(t, "P2", p2[0].Labels["severity"])
	// The outage began 10 minutes ago by the group's clock, which this
	// test moves faster than the wall's.
	within(t, p2[0].StartsAt, before.Add(-10*time.Minute), after.Add(-10*time.Minute), "startsAt")

	clock.Advance(5 * time.Minute)
	_, err = command.Execute(context.Background(), g, succeeding("dep"))
	require.NoError(t, err)
	before = time.Now()
	w.Check()
	resolved := rc.wait(3)[2]
	require.Len(t, resolved, 2, "every tier the outage fired")
	for _, a := range resolved {
		within(t, a.EndsAt, before, time.Now(), "endsAt of "+a.Labels["severity"])
		require.True(t, strings.HasPrefix(a.Annotations["action"], "no action: dependency deps (command dep) recovered"), a.Annotations["action"])
	}
	require.ElementsMatch(t, []string{"P2", "P3"}, []string{resolved[0].Labels["severity"], resolved[1].Labels["severity"]})
	waitCounts(t, h, 4, 0)
}

// TestWebhookResolvesAClosedGroupsAlerts: a group closed while its alert
// fires sends the alert's end (endsAt now), not the alert again at every
// Resend until the Webhook closes.
func TestWebhookResolvesAClosedGroupsAlerts(t *testing.T) {
	rc := newReceiver(t, nil)
	h := newWebhook(t, WebhookConfig{URL: rc.srv.URL + "/api/v2/alerts", Resend: time.Hour})
	g, w, clock := webhookGroup(t, h)
	_, err := command.Execute(context.Background(), g, failing("dep", errRefused))
	require.ErrorIs(t, err, errRefused)
	clock.Advance(time.Minute)
	w.Check()
	require.Len(t, rc.wait(1)[0], 1)

	before := time.Now()
	require.NoError(t, g.Close(context.Background()))
	ended := rc.wait(2)[1]
	require.Len(t, ended, 1)
	require.Equal(t, "P3", ended[0].Labels["severity"])
	within(t, ended[0].EndsAt, before, time.Now(), "endsAt")
	require.True(t, strings.HasPrefix(ended[0].Annotations["action"], "no action: dependency deps (command dep) is no longer watched"),
		ended[0].Annotations["action"])
	waitCounts(t, h, 2, 0)
}

// TestWebhookRetriesWithBackoff: a receiver that answers 503 twice gets
// the same alert a third time; each failed attempt is counted and logged.
func TestWebhookRetriesWithBackoff(t *testing.T) {
	rc := newReceiver(t, func(n int) int {
		if n <= 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	var logs logtest.Buffer
	h := newWebhook(t, WebhookConfig{URL: rc.srv.URL + "/api/v2/alerts", Backoff: time.Millisecond, Resend: time.Hour,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	h.OnAlert(Alert{Kind: Degraded, Group: "deps", Command: "read", Calls: 40, DegradedRate: 0.25})
	got := rc.wait(1)[0]
	require.Len(t, got, 1)
	require.Equal(t, map[string]string{"alertname": "BulwarkCommandDegraded", "group": "deps", "command": "read"}, got[0].Labels)
	waitCounts(t, h, 1, 2)
	require.Equal(t, 2, strings.Count(logs.String(), "alert webhook attempt failed"), logs.String())
	require.Contains(t, logs.String(), "503 Service Unavailable")
}

// TestWebhookKeepsWhatFailedForTheNextRound: a round whose attempts all
// fail keeps its alerts; the next round (here the next alert's) sends
// them with the new one.
func TestWebhookKeepsWhatFailedForTheNextRound(t *testing.T) {
	rc := newReceiver(t, func(n int) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	h := newWebhook(t, WebhookConfig{URL: rc.srv.URL + "/api/v2/alerts", Attempts: 2, Backoff: time.Millisecond,
		Resend: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	h.OnAlert(Alert{Kind: Open, Group: "deps", Command: "a", Tier: "P3", OpenFor: time.Minute})
	waitCounts(t, h, 0, 2)

	h.OnAlert(Alert{Kind: Open, Group: "deps", Command: "b", Tier: "P3", OpenFor: time.Minute})
	got := rc.wait(1)[0]
	require.Len(t, got, 2)
	require.Equal(t, []string{"a", "b"}, []string{got[0].Labels["command"], got[1].Labels["command"]})
	waitCounts(t, h, 2, 2)
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Empty(t, h.pending, "delivered: nothing pending")
	require.Len(t, h.firing, 2, "kept for the resends")
}

// TestWebhookRefusedIsNotRetried: a 400 is not retried and its alerts are
// not pending any more, so the next alert goes alone; the refused one,
// still firing, waits for the next Resend.
func TestWebhookRefusedIsNotRetried(t *testing.T) {
	rc := newReceiver(t, func(n int) int {
		if n == 1 {
			return http.StatusBadRequest
		}
		return http.StatusOK
	})
	var logs logtest.Buffer
	h := newWebhook(t, WebhookConfig{URL: rc.srv.URL + "/api/v2/alerts", Backoff: time.Millisecond, Resend: time.Hour,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	h.OnAlert(Alert{Kind: Open, Group: "deps", Command: "a", Tier: "P3", OpenFor: time.Minute})
	waitCounts(t, h, 0, 1)
	h.OnAlert(Alert{Kind: Open, Group: "deps", Command: "b", Tier: "P3", OpenFor: time.Minute})
	got := rc.wait(1)[0]
	require.Len(t, got, 1)
	require.Equal(t, "b", got[0].Labels["command"])
	waitCounts(t, h, 1, 1)
	rc.mu.Lock()
	require.Equal(t, 2, rc.n, "the 400 was not retried")
	rc.mu.Unlock()
	require.Contains(t, logs.String(), "refused the alerts; dropped until the next Resend")
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Len(t, h.firing, 2)
}

// TestWebhookResendsFiringAlerts: a firing alert is sent again every
// Resend, its endsAt moving ahead; once resolved it is sent no more.
func TestWebhookResendsFiringAlerts(t *testing.T) {
	rc := newReceiver(t, nil)
	h := newWebhook(t, WebhookConfig{URL: rc.srv.URL + "/api/v2/alerts", Resend: 20 * time.Millisecond})
	open := Alert{Kind: Open, Group: "deps", Tier: "P3", OpenFor: time.Minute}
	h.OnAlert(open)
	posts := rc.wait(3)
	for i, p := range posts[:3] {
		require.Len(t, p, 1)
		require.Equal(t, "BulwarkGroupCircuitOpen", p[0].Labels["alertname"])
		if i > 0 {
			require.True(t, p[0].EndsAt.After(posts[i-1][0].EndsAt), "endsAt moves ahead")
			require.Equal(t, posts[0][0].StartsAt, p[0].StartsAt)
		}
	}
	open.Kind = Resolved
	h.OnAlert(open)
	require.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.firing) == 0 && len(h.pending) == 0
	}, 10*time.Second, time.Millisecond, "the resolution delivered, nothing left to resend")
}

// TestWebhookHungReceiverBlocksNeitherCheckNorClose: a receiver that
// never answers costs Check nothing (OnAlert only queues), each attempt
// ends at Timeout, and Close returns within its last round's attempts
// with their error.
func TestWebhookHungReceiverBlocksNeitherCheckNorClose(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the server notices the client gone only once the body is read
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hung.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for the handlers
	h, err := NewWebhook(WebhookConfig{URL: hung.URL + "/api/v2/alerts", Timeout: 50 * time.Millisecond, Attempts: 2,
		Backoff: time.Millisecond, Resend: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	g, w, clock := webhookGroup(t, h)
	_, _ = command.Execute(context.Background(), g, failing("dep", errRefused))
	clock.Advance(time.Minute)
	checkReturns(t, w, "Check blocked on the webhook")
	waitCounts(t, h, 0, 2) // both attempts timed out

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = h.Close(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the last round's attempts timed out too")
	require.NoError(t, ctx.Err(), "Close returned within its attempts, not at its ctx's deadline")
	require.NoError(t, h.Close(ctx), "Close is idempotent")
	h.OnAlert(Alert{Kind: Open, Group: "deps", Tier: "P1"})
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Len(t, h.firing, 1, "an alert after Close is dropped")
}

func TestWebhookConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg  WebhookConfig
		want string
	}{
		{WebhookConfig{}, "WebhookConfig.URL must be set"},
		{WebhookConfig{URL: "alertmanager:9093"}, `WebhookConfig.URL "alertmanager:9093"`},
		{WebhookConfig{URL: "ftp://a/x"}, `WebhookConfig.URL "ftp://a/x"`},
		{WebhookConfig{URL: "http://a/x", Timeout: -time.Second}, "WebhookConfig.Timeout -1s"},
		{WebhookConfig{URL: "http://a/x", Attempts: 11}, "WebhookConfig.Attempts 11 must be in [1, 10]"},
		{WebhookConfig{URL: "http://a/x", Attempts: -1}, "WebhookConfig.Attempts -1"},
		{WebhookConfig{URL: "http://a/x", Backoff: -time.Second}, "WebhookConfig.Backoff -1s"},
		{WebhookConfig{URL: "http://a/x", Resend: -time.Second}, "WebhookConfig.Resend -1s"},
		{WebhookConfig{URL: "http://a/x", Labels: map[string]string{"1st": "x"}}, `WebhookConfig.Labels "1st" is not a label name`},
		{WebhookConfig{URL: "http://a/x", Labels: map[string]string{"severity": "P1"}}, `WebhookConfig.Labels "severity" is set by the webhook`},
	} {
		h, err := NewWebhook(tc.cfg)
		require.Nil(t, h)
		require.ErrorIs(t, err, command.ErrInvalidConfig)
		require.True(t, strings.Contains(err.Error(), tc.want), "%v lacks %q", err, tc.want)
	}
}

// TestWebhookThroughRealAlertmanager: a real Alertmanager (Debian's
// prometheus-alertmanager) accepts the webhook's alerts: GET
// /api/v2/alerts gives the tier back, active, with its labels and
// annotations, and drops it once its resolution arrives.
func TestWebhookThroughRealAlertmanager(t *testing.T) {
	am := promtest.Alertmanager(t, "route:\n  receiver: none\nreceivers:\n  - name: none\n")
	h := newWebhook(t, WebhookConfig{URL: am.URL + "/api/v2/alerts", Labels: map[string]string{"instance": "a:1"}, Resend: time.Hour})
	g, w, clock := webhookGroup(t, h)
	_, _ = command.Execute(withRequestID("req-42"), g, failing("dep", errRefused))
	clock.Advance(time.Minute)
	w.Check()

	type held struct {
		Labels      map[string]string
		Annotations map[string]string
		Status      struct{ State string }
	}
	alerts := func() ([]held, error) {
		resp, err := am.Client.Get(am.URL + "/api/v2/alerts")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, errors.New(resp.Status)
		}
		var got []held
		return got, json.NewDecoder(resp.Body).Decode(&got)
	}
	var got []held
	promtest.Eventually(t, 30*time.Second, "the alert in Alertmanager", func() error {
		var err error
		if got, err = alerts(); err == nil && len(got) == 0 {
			err = errors.New("no alert yet")
		}
		return err
	})
	require.Len(t, got, 1)
	require.Equal(t, map[string]string{"alertname": "BulwarkCommandCircuitOpen", "group": "deps", "command": "dep",
		"severity": "P3", "instance": "a:1"}, got[0].Labels)
	require.Equal(t, "check the health of dependency deps (command dep); breaker open for 1 min, "+
		"reason error_ratio: 1 of 1 calls failed or timed out", got[0].Annotations["action"])
	require.Equal(t, "request req-42: dial tcp 10.0.0.7:443: connection refused", got[0].Annotations["errors"])
	require.Equal(t, "active", got[0].Status.State)

	clock.Advance(5 * time.Minute)
	_, err := command.Execute(context.Background(), g, succeeding("dep"))
	require.NoError(t, err)
	w.Check()
	promtest.Eventually(t, 30*time.Second, "the alert resolved", func() error {
		got, err := alerts()
		if err == nil && len(got) > 0 {
			err = fmt.Errorf("still held: %+v", got)
		}
		return err
	})
	waitCounts(t, h, 2, 0)
}
