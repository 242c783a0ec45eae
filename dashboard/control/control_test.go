package control

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/rules"
)

// TestMain fails the run if a test leaves a goroutine behind. IgnoreCurrent
// spares the goroutines present before any test: those of ants' default
// pool, which the ants package starts when it is loaded.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

const testToken = "0123456789abcdef-test"

var quietLog = slog.New(slog.DiscardHandler)

// controlRig is a registry with group "users" (command "get") behind a
// control endpoint.
func controlRig(t *testing.T, cfg Config) (*command.Registry, *command.Group, http.Handler) {
	reg := command.NewRegistry(command.RegistryConfig{Clock: new(metrics.ManualClock), Logger: quietLog})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("users", command.GroupConfig{Commands: map[string]command.CommandConfig{"get": {}}})
	require.NoError(t, err)
	cfg.Logger = quietLog
	h, err := New(reg, cfg)
	require.NoError(t, err)
	return reg, g, h
}

func post(h http.Handler, body string, header map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:7979/control", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// A control endpoint needs a token, a long one.
func TestControlNeedsAToken(t *testing.T) {
	reg := command.NewRegistry(command.RegistryConfig{})
	for _, token := range []string{"", "short"} {
		_, err := New(reg, Config{Token: token})
		require.ErrorIs(t, err, ErrInvalidConfig, "%q", token)
		assert.ErrorIs(t, Config{Token: token}.Validate(), ErrInvalidConfig, "Validate reports what New does")
	}
	require.NoError(t, Config{Token: testToken}.Validate())
}

// TestControlRefusesAndChangesNothing: without the right token, or from
// another origin, or not as a JSON POST, nothing changes.
func TestControlRefusesAndChangesNothing(t *testing.T) {
	_, g, h := controlRig(t, Config{Token: testToken})
	body := `{"action": "force-open", "group": "users"}`
	for name, tc := range map[string]struct {
		header map[string]string
		method string
		want   int
	}{
		"missing token":  {nil, "", http.StatusUnauthorized},
		"wrong token":    {map[string]string{TokenHeader: testToken + "x"}, "", http.StatusForbidden},
		"prefix token":   {map[string]string{TokenHeader: testToken[:MinTokenLength]}, "", http.StatusForbidden},
		"cross origin":   {map[string]string{TokenHeader: testToken, "Origin": "http://evil.example"}, "", http.StatusForbidden},
		"cross site":     {map[string]string{TokenHeader: testToken, "Sec-Fetch-Site": "cross-site"}, "", http.StatusForbidden},
		"form post":      {map[string]string{TokenHeader: testToken, "Content-Type": "application/x-www-form-urlencoded"}, "", http.StatusUnsupportedMediaType},
		"GET":            {map[string]string{TokenHeader: testToken}, http.MethodGet, http.StatusMethodNotAllowed},
		"unknown action": {map[string]string{TokenHeader: testToken}, "", http.StatusBadRequest},
	} {
		b := body
		if name == "unknown action" {
			b = `{"action": "explode", "group": "users"}`
		}
		var w *httptest.ResponseRecorder
		if tc.method == http.MethodGet {
			r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:7979/control", nil)
			r.Header.Set(TokenHeader, testToken)
			w = httptest.NewRecorder()
			h.ServeHTTP(w, r)
		} else {
			w = post(h, b, tc.header)
		}
		assert.Equal(t, tc.want, w.Code, name)
		assert.Equal(t, circuit.Normal, g.Breaker().Snapshot().Mode, name)
	}
}

func TestControlActions(t *testing.T) {
	_, g, h := controlRig(t, Config{Token: testToken})
	tok := map[string]string{TokenHeader: testToken, "Origin": "http://127.0.0.1:7979", "Sec-Fetch-Site": "same-origin"}
	require.Equal(t, http.StatusNoContent, post(h, `{"action": "check"}`, tok).Code)
	require.Equal(t, http.StatusNoContent, post(h, `{"action": "force-open", "group": "users"}`, tok).Code)
	assert.Equal(t, circuit.ForcedOpen, g.Breaker().Snapshot().Mode)
	require.Equal(t, http.StatusNoContent, post(h, `{"action": "force-closed", "group": "users", "command": "get"}`, tok).Code)
	get, _ := g.CommandBreaker("get")
	assert.Equal(t, circuit.ForcedClosed, get.Snapshot().Mode)
	require.Equal(t, http.StatusNoContent, post(h, `{"action": "reset", "group": "users", "command": "get"}`, tok).Code)
	assert.Equal(t, circuit.Normal, get.Snapshot().Mode)
	require.Equal(t, http.StatusNoContent, post(h, `{"action": "normal", "group": "users"}`, tok).Code)
	assert.Equal(t, circuit.Closed, g.Breaker().State())
	assert.Equal(t, http.StatusNotFound, post(h, `{"action": "normal", "group": "nope"}`, tok).Code)
	assert.Equal(t, http.StatusNotFound, post(h, `{"action": "normal", "group": "users", "command": "nope"}`, tok).Code)
	assert.Equal(t, http.StatusNotFound, post(h, `{"action": "apply-rules", "rules": {"groups": {}}}`, tok).Code,
		"rules not enabled")
}

func TestControlAppliesRules(t *testing.T) {
	reg := command.NewRegistry(command.RegistryConfig{Clock: new(metrics.ManualClock), Logger: quietLog})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("users", command.GroupConfig{})
	require.NoError(t, err)
	live, err := rules.NewManager(reg, quietLog)
	require.NoError(t, err)
	ctl, err := New(reg, Config{Token: testToken, Rules: live, Logger: quietLog})
	require.NoError(t, err)
	tok := map[string]string{TokenHeader: testToken}
	require.Equal(t, http.StatusNoContent, post(ctl, `{"action": "apply-rules", "rules": {"groups": {"users": {"maxConcurrent": 33}}}}`, tok).Code)
	assert.Equal(t, 33, g.Config().MaxConcurrent)
	w := post(ctl, `{"action": "apply-rules", "rules": {"groups": {"users": {"maxConcurrent": -1}}}}`, tok)
	assert.Equal(t, http.StatusUnprocessableEntity, w.Code)
	assert.Contains(t, w.Body.String(), "MaxConcurrent -1")
	assert.Equal(t, 33, g.Config().MaxConcurrent, "a rejected document changes nothing")
	w = post(ctl, `{"action": "apply-rules", "rules": {"groups": {"": {}, "users": {"maxConcurrent": 9}}}}`, tok)
	assert.Equal(t, http.StatusUnprocessableEntity, w.Code)
	assert.Equal(t, 33, g.Config().MaxConcurrent, `nor does one refused for a group named ""`)
	w = post(ctl, `{"action": "apply-rules", "rules": {"groups": {"users": {"maxConcurrent": 44}}}}`, nil)
	assert.Equal(t, http.StatusUnauthorized, w.Code)
	assert.Equal(t, 33, g.Config().MaxConcurrent)
}

// "reset" was two SetMode calls (ForcedClosed, then Normal): not atomic (a
// call in between was admitted as forced closed), reported with reason
// forced, and a reset of a closed breaker left no trace at all. It is
// circuit.Breaker.Reset now: one transition with reason reset.
func TestControlResetIsOneTransition(t *testing.T) {
	_, g, h := controlRig(t, Config{Token: testToken})
	tok := map[string]string{TokenHeader: testToken}
	b := g.Breaker()
	reasons := func() []circuit.Reason {
		var out []circuit.Reason
		for _, tr := range b.Snapshot().Transitions {
			out = append(out, tr.Reason)
		}
		return out
	}
	require.Equal(t, http.StatusNoContent, post(h, `{"action": "reset", "group": "users"}`, tok).Code)
	require.Equal(t, []circuit.Reason{circuit.ReasonReset}, reasons(), "a closed breaker's reset shows")
	require.Equal(t, http.StatusNoContent, post(h, `{"action": "force-open", "group": "users"}`, tok).Code)
	require.Equal(t, http.StatusNoContent, post(h, `{"action": "reset", "group": "users"}`, tok).Code)
	require.Equal(t, []circuit.Reason{circuit.ReasonReset, circuit.ReasonForced, circuit.ReasonReset}, reasons())
	s := b.Snapshot()
	assert.Equal(t, circuit.Closed, s.State)
	assert.Equal(t, circuit.Normal, s.Mode)
}
