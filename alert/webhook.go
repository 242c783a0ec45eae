package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults and bounds of WebhookConfig, as its fields document them.
const (
	defaultWebhookTimeout  = 5 * time.Second
	defaultWebhookResend   = time.Minute
	defaultWebhookAttempts = 3
	maxWebhookAttempts     = 10
	defaultWebhookBackoff  = 200 * time.Millisecond
)

// WebhookConfig configures a Webhook. URL is required; every other field
// is optional.
type WebhookConfig struct {
	// URL receives the alerts: a POST of a JSON array in the format of
	// Alertmanager's API v2, such as "http://alertmanager:9093/api/v2/alerts".
	// http or https.
	URL string
	// Labels are added to every alert's labels, such as the instance
	// ({"instance": "10.0.0.5:8080"}, as prom/alertmanager.yml groups and
	// inhibits by it) or the service. Names must be valid label names
	// ([a-zA-Z_][a-zA-Z0-9_]*) other than those the webhook sets
	// (alertname, group, command, severity).
	Labels map[string]string
	// GeneratorURL, if set, is every alert's back-link, such as the
	// service's dashboard page.
	GeneratorURL string
	// Timeout bounds each POST, its answer included. Default 5 s.
	Timeout time.Duration
	// Attempts is how many times one round tries its POST before it gives
	// up until the next round (the next alert or the next Resend). A 4xx
	// answer other than 408 and 429 is not retried: the round's alerts are
	// dropped, logged at Error (the firing ones go again at the next
	// Resend), so that a payload the receiver refuses cannot hold back
	// every later alert. In [1, 10]; default 3.
	Attempts int
	// Backoff is the wait before a round's second attempt; it doubles for
	// each further one, up to 8 Backoffs. A round thus lasts at most
	// Attempts × Timeout plus its waits (defaults: 3 × 5 s + 0.6 s), on
	// the webhook's goroutine, never the Watcher's. Default 200 ms.
	Backoff time.Duration
	// Resend is how often the alerts still firing are sent again: an
	// Alertmanager resolves an alert it has not heard of by its endsAt,
	// which the webhook sets 4 Resends ahead. Default 1 min.
	Resend time.Duration
	// Client sends the POSTs. Default: a client of the webhook's own,
	// whose connections Close closes.
	Client *http.Client
	// Logger receives a Warn record for each failed attempt. Default
	// slog.Default().
	Logger *slog.Logger
}

// Webhook sends alerts to an Alertmanager (or any receiver of its API v2
// format), so that its routes page the tiers: set its OnAlert as
// Config.OnAlert. A breaker's tier is the severity label, and a tier
// stays firing while the outage lasts (as prom/alerts.yml's rules do), so
// alertmanager.yml's inhibition rules apply; Resolved resolves every tier
// of the outage. OnAlert never blocks: one goroutine of the Webhook's own
// posts, with a timeout and a bounded number of attempts, and what failed
// waits for the next round. What it holds is bounded by the alerts firing.
// An alert still firing when its group is closed is resolved then (the
// Watcher's Unwatch sends it, marked Alert.Unwatched). The degraded alarm's
// severity is the first tier's. Close stops it. It is safe for concurrent use.
type Webhook struct {
	cfg       WebhookConfig // effective
	client    *http.Client
	ownClient bool // client is the Webhook's: Close closes its connections

	mu      sync.Mutex
	firing  map[string]*postable // by labels; sent again every Resend
	pending map[string]*postable // changed since they were last delivered
	gen     uint64               // stamps each change, so a delivery clears only what it sent

	wake    chan struct{}      // cap 1: a change is pending
	quit    chan struct{}      // Close closes it: no round starts after
	ctx     context.Context    // the goroutine's rounds': ends when Close gives up waiting, or after it
	stop    context.CancelFunc // ends ctx
	done    chan struct{}      // closed when the goroutine has returned
	closing sync.Once

	delivered, failures atomic.Int64
}

// postable is one alert in the JSON of Alertmanager's POST /api/v2/alerts.
type postable struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`

	gen uint64 // the change that made it
}

// NewWebhook returns a Webhook configured by cfg, with its goroutine
// running. The error wraps command.ErrInvalidConfig and names the field
// when cfg is invalid.
func NewWebhook(cfg WebhookConfig) (*Webhook, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	h := &Webhook{cfg: cfg, client: cfg.Client,
		firing: map[string]*postable{}, pending: map[string]*postable{},
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	h.ctx, h.stop = context.WithCancel(context.Background())
	if h.client == nil {
		h.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		h.ownClient = true
	}
	go h.run()
	return h, nil
}

// withDefaults returns c with its defaults applied.
func (c WebhookConfig) withDefaults() WebhookConfig {
	if c.Timeout == 0 {
		c.Timeout = defaultWebhookTimeout
	}
	if c.Attempts == 0 {
		c.Attempts = defaultWebhookAttempts
	}
	if c.Backoff == 0 {
		c.Backoff = defaultWebhookBackoff
	}
	if c.Resend == 0 {
		c.Resend = defaultWebhookResend
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate reports the first invalid field of c, by name and value.
func (c WebhookConfig) validate() error {
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		return invalid("WebhookConfig.URL must be set")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return invalid("WebhookConfig.URL %q must be an http or https URL", c.URL)
	case c.Timeout < 0:
		return invalid("WebhookConfig.Timeout %v must not be negative", c.Timeout)
	case c.Attempts < 0 || c.Attempts > maxWebhookAttempts:
		return invalid("WebhookConfig.Attempts %d must be in [1, %d]", c.Attempts, maxWebhookAttempts)
	case c.Backoff < 0:
		return invalid("WebhookConfig.Backoff %v must not be negative", c.Backoff)
	case c.Resend < 0:
		return invalid("WebhookConfig.Resend %v must not be negative", c.Resend)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Labels)) {
		switch {
		case !labelName(name):
			return invalid("WebhookConfig.Labels %q is not a label name", name)
		case name == "alertname" || name == "group" || name == "command" || name == "severity":
			return invalid("WebhookConfig.Labels %q is set by the webhook", name)
		}
	}
	return nil
}

// labelName reports whether s is a Prometheus label name.
func labelName(s string) bool {
	for i, r := range s {
		if !(r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9') {
			return false
		}
	}
	return s != ""
}

// OnAlert queues a for the webhook's goroutine and returns at once; set it
// as Config.OnAlert. An alert that arrives after Close has begun is
// dropped.
func (h *Webhook) OnAlert(a Alert) {
	select {
	case <-h.quit:
		return
	default:
	}
	now := time.Now()
	h.mu.Lock()
	switch a.Kind {
	case Open, Degraded:
		p := h.postable(a, now)
		k := key(p.Labels)
		if old := h.firing[k]; old != nil {
			p.StartsAt = old.StartsAt
		}
		h.firing[k], h.pending[k] = p, p
	case Resolved, DegradedCleared:
		// Every tier the outage fired: the same alert but its severity.
		name := alertName(a)
		for k, p := range h.firing {
			if p.Labels["alertname"] == name && p.Labels["group"] == a.Group && p.Labels["command"] == a.Command {
				delete(h.firing, k)
				h.gen++
				r := *p
				r.Annotations, r.EndsAt, r.gen = annotations(a), now, h.gen
				h.pending[k] = &r
			}
		}
	}
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// postable returns a as Alertmanager receives it, firing until 4 Resends
// from now; h.mu is held (it stamps h.gen).
func (h *Webhook) postable(a Alert, now time.Time) *postable {
	labels := maps.Clone(h.cfg.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels["alertname"], labels["group"] = alertName(a), a.Group
	if a.Command != "" {
		labels["command"] = a.Command
	}
	if a.Tier != "" {
		labels["severity"] = a.Tier
	}
	h.gen++
	return &postable{Labels: labels, Annotations: annotations(a), StartsAt: now.Add(-a.OpenFor),
		EndsAt: now.Add(4 * h.cfg.Resend), GeneratorURL: h.cfg.GeneratorURL, gen: h.gen}
}

// alertName returns the alertname of a, the one prom/alerts.yml gives the
// same condition.
func alertName(a Alert) string {
	switch {
	case a.Kind == Degraded || a.Kind == DegradedCleared:
		return "BulwarkCommandDegraded"
	case a.Command == "":
		return "BulwarkGroupCircuitOpen"
	}
	return "BulwarkCommandCircuitOpen"
}

// annotations returns a's summary, action line and error samples, one a
// line.
func annotations(a Alert) map[string]string {
	summary := fmt.Sprintf("Breaker of %s/%s not closed for %s", a.Group, a.Command, minutes(a.OpenFor))
	switch {
	case a.Kind == Degraded || a.Kind == DegradedCleared:
		summary = fmt.Sprintf("%s/%s: %.1f%% of calls served by a fallback", a.Group, a.Command, 100*a.DegradedRate)
	case a.Command == "":
		summary = fmt.Sprintf("Group breaker of %s not closed for %s", a.Group, minutes(a.OpenFor))
	}
	out := map[string]string{"summary": summary, "action": a.Action()}
	if len(a.Errors) > 0 {
		lines := make([]string, len(a.Errors))
		for i, e := range a.Errors {
			lines[i] = e.line()
		}
		out["errors"] = strings.Join(lines, "\n")
	}
	return out
}

// key identifies an alert by its labels, as Alertmanager does.
func key(labels map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		fmt.Fprintf(&b, "%q=%q,", k, labels[k])
	}
	return b.String()
}

// Counts returns how many alerts the receiver has accepted (each resend
// counts) and how many POST attempts failed (an error, or a status other
// than 2xx), since NewWebhook.
func (h *Webhook) Counts() (delivered, failures int64) {
	return h.delivered.Load(), h.failures.Load()
}

// Close stops the webhook's goroutine, waiting for a round in progress
// until ctx ends (then cutting it short), and tries once more, within ctx,
// to deliver what is pending (a resolution above all); it returns the
// error of that last round if it failed. The alerts still firing are not
// resolved: the receiver expires them at their endsAt. Alerts that arrive
// after Close are dropped. Close is idempotent.
func (h *Webhook) Close(ctx context.Context) error {
	var err error
	h.closing.Do(func() {
		close(h.quit)
		select {
		case <-h.done:
		case <-ctx.Done():
			h.stop()
			<-h.done
		}
		h.stop()
		err = h.round(ctx, false)
		if h.ownClient {
			h.client.CloseIdleConnections()
		}
	})
	return err
}

// run sends what changes at once and what is firing every Resend, until
// Close.
func (h *Webhook) run() {
	defer close(h.done)
	resend := time.NewTicker(h.cfg.Resend)
	defer resend.Stop()
	for {
		select {
		case <-h.quit:
			return
		case <-h.wake:
			_ = h.round(h.ctx, false)
		case <-resend.C:
			_ = h.round(h.ctx, true)
		}
	}
}

// round posts what is pending, and with all what is firing too (its endsAt
// moved 4 Resends ahead), in one POST of up to Attempts attempts. What it
// delivered is no longer pending unless it changed meanwhile.
func (h *Webhook) round(ctx context.Context, all bool) error {
	now := time.Now()
	h.mu.Lock()
	batch := map[string]postable{}
	if all {
		for k, p := range h.firing {
			p.EndsAt = now.Add(4 * h.cfg.Resend)
			batch[k] = *p
		}
	}
	for k, p := range h.pending {
		batch[k] = *p
	}
	h.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	alerts := slices.Collect(maps.Values(batch))
	slices.SortFunc(alerts, func(a, b postable) int { return strings.Compare(key(a.Labels), key(b.Labels)) })
	body, err := json.Marshal(alerts)
	if err == nil {
		err = h.post(ctx, body)
	}
	var refused refusedError
	switch {
	case errors.As(err, &refused):
		// Sending it again would be refused again, and would hold back
		// every later alert with it: the firing ones go again at the
		// next Resend, the rest is dropped.
		h.cfg.Logger.LogAttrs(ctx, slog.LevelError, "bulwark: alert webhook refused the alerts; dropped until the next Resend",
			slog.String("url", h.cfg.URL), slog.Int("alerts", len(alerts)), slog.String("error", err.Error()))
	case err != nil:
		return err
	default:
		h.delivered.Add(int64(len(alerts)))
	}
	h.mu.Lock()
	for k, p := range batch {
		if q := h.pending[k]; q != nil && q.gen == p.gen {
			delete(h.pending, k)
		}
	}
	h.mu.Unlock()
	return err
}

// refusedError is an answer that retrying cannot change: a 4xx status
// other than 408 and 429 (a malformed payload).
type refusedError struct{ error }

// post sends body in up to Attempts attempts, waiting Backoff, then twice
// as long, up to 8 Backoffs, between them; it gives up early when ctx
// ends or the receiver refuses body (refusedError).
func (h *Webhook) post(ctx context.Context, body []byte) error {
	wait := h.cfg.Backoff
	var err error
	for attempt := 1; ; attempt++ {
		if err = h.attempt(ctx, body); err == nil {
			return nil
		}
		h.failures.Add(1)
		h.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "bulwark: alert webhook attempt failed",
			slog.String("url", h.cfg.URL), slog.Int("attempt", attempt), slog.Int("attempts", h.cfg.Attempts),
			slog.String("error", err.Error()))
		if attempt == h.cfg.Attempts || ctx.Err() != nil || errors.As(err, new(refusedError)) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 8*h.cfg.Backoff)
	}
}

// attempt is one POST of body, within Timeout.
func (h *Webhook) attempt(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		err := fmt.Errorf("alert webhook: %s: %s", resp.Status, bytes.TrimSpace(msg))
		if resp.StatusCode/100 == 4 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests {
			return refusedError{err}
		}
		return err
	}
	return nil
}
