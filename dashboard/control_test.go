package dashboard

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/dashboard/control"
	"github.com/bulwark-go/bulwark/metrics"
)

const testToken = "0123456789abcdef-test"

// controlled returns a registry with group "users" and the handler of New
// for it, with the control endpoint ctl (nil: none).
func controlled(t *testing.T, ctl func(*command.Registry) http.Handler) (*command.Group, *Handler) {
	reg := command.NewRegistry(command.RegistryConfig{Clock: new(metrics.ManualClock), Logger: quietLog})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("users", command.GroupConfig{})
	require.NoError(t, err)
	cfg := Config{Logger: quietLog}
	if ctl != nil {
		cfg.Control = ctl(reg)
	}
	h, err := New(reg, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return g, h
}

// forceOpen posts a force-open of group users to h's control path.
func forceOpen(h http.Handler) int {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:7979"+ControlPath, strings.NewReader(`{"action": "force-open", "group": "users"}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(control.TokenHeader, testToken)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// page returns the page h serves.
func page(h http.Handler) string {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	return w.Body.String()
}

// Without a control endpoint nothing the handler serves changes a breaker:
// a control request reaches the page, which answers GET only, and the page
// offers no controls.
func TestControlOffByDefault(t *testing.T) {
	g, h := controlled(t, nil)
	assert.Equal(t, http.StatusMethodNotAllowed, forceOpen(h), "no endpoint: the page answers, GET only")
	assert.Equal(t, circuit.Normal, g.Breaker().Snapshot().Mode)
	assert.Contains(t, page(h), `<meta name="bulwark-control" content="">`, "the page offers no controls")
}

// New serves Config.Control at ControlPath, and the page offers it.
func TestNewServesTheControlEndpoint(t *testing.T) {
	g, h := controlled(t, func(reg *command.Registry) http.Handler {
		ctl, err := control.New(reg, control.Config{Token: testToken, Logger: quietLog})
		require.NoError(t, err)
		return ctl
	})
	assert.Equal(t, http.StatusNoContent, forceOpen(h))
	assert.Equal(t, circuit.ForcedOpen, g.Breaker().Snapshot().Mode)
	assert.Contains(t, page(h), `<meta name="bulwark-control" content="control">`)
}

// A stream serves no control endpoint: NewStream refuses a Control rather
// than ignore it.
func TestNewStreamRefusesControl(t *testing.T) {
	_, err := NewStream(&fakeSource{}, Config{Control: http.NotFoundHandler()})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.ErrorContains(t, err, "a stream serves no control endpoint")
}

func TestNativeGroupCarriesConfigGeneration(t *testing.T) {
	var e bulwarkGroup
	e.fill(0, &command.GroupSnapshot{ConfigGeneration: 3, ConfigAge: 1500 * 1e6})
	assert.Equal(t, uint64(3), e.ConfigGeneration)
	assert.Equal(t, int64(1500), e.ConfigAgeMs)
}
