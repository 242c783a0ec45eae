package browsertest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/dashboard"
	"github.com/bulwark-go/bulwark/dashboard/control"
)

const controlToken = "browser-test-token-0123456789"

// serveDashboard serves reg's dashboard with cfg until the test ends.
func serveDashboard(t *testing.T, live *liveCommands, cfg dashboard.Config) string {
	cfg.Logger = slog.New(slog.DiscardHandler)
	h, err := dashboard.New(live.reg, cfg)
	require.NoError(t, err)
	sw := &switchable{h: h}
	ts := httptest.NewServer(sw)
	t.Cleanup(func() {
		sw.down.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, h.Close(ctx))
		ts.Close()
	})
	return ts.URL
}

// evalString evaluates a JavaScript expression that yields a string.
func evalString(ctx context.Context, expr string) func() (string, error) {
	return func() (string, error) { return chromedp.Run(ctx, chromedp.Evaluate[string](expr)) }
}

// controlButtons counts the breaker control buttons on the page.
const controlButtons = `String(document.querySelectorAll('.controls button').length)`

// TestBrowserControls: the page shows controls only to whoever enters the
// token the endpoint accepts, and they work; without a control endpoint it
// shows none at all.
func TestBrowserControls(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped in -short mode")
	}
	ctx := startChromium(t)
	live := startLiveCommands(t)

	// No token configured: no token box, no controls.
	plain := serveDashboard(t, live, dashboard.Config{})
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(plain+"/?delay=100")))
	waitFor(t, 10*time.Second, "GetUser tile", "Closed", func() (string, error) { return tileState(ctx, "GetUser") })
	waitFor(t, time.Second, "token box hidden", "true", evalString(ctx, `String(document.getElementById('control').hidden)`))
	waitFor(t, time.Second, "no controls", "0", evalString(ctx, controlButtons))

	// With a token: controls only once the right token is entered.
	ctl, err := control.New(live.reg, control.Config{Token: controlToken, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	url := serveDashboard(t, live, dashboard.Config{Control: ctl})
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url+"/?delay=100")))
	waitFor(t, 10*time.Second, "GetUser tile", "Closed", func() (string, error) { return tileState(ctx, "GetUser") })
	waitFor(t, time.Second, "token box shown", "false", evalString(ctx, `String(document.getElementById('control').hidden)`))
	waitFor(t, time.Second, "no controls before the token", "0", evalString(ctx, controlButtons))

	unlock := func(token string) {
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(
			`(() => { document.getElementById('control-token').value = %q; document.getElementById('control-unlock').click(); return true; })()`, token)))
		require.NoError(t, err)
	}
	status := evalString(ctx, `document.getElementById('control-status').textContent`)
	unlock("wrong-token-wrong-token")
	waitFor(t, 5*time.Second, "wrong token refused", "403", func() (string, error) {
		s, err := status()
		if len(s) >= len("control: 403") {
			s = s[len("control: ") : len("control: ")+3]
		}
		return s, err
	})
	waitFor(t, time.Second, "still no controls", "0", evalString(ctx, controlButtons))
	assert.Equal(t, circuit.Normal, live.users.Breaker().Snapshot().Mode)

	unlock(controlToken)
	waitFor(t, 5*time.Second, "unlocked", "controls unlocked", status)
	waitFor(t, 5*time.Second, "GetUser controls", "4", evalString(ctx, fmt.Sprintf(
		`(() => { const t = %s; return t ? String(t.querySelectorAll('.controls button').length) : ''; })()`, tileJS("GetUser"))))

	click := func(name, action string) {
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(
			`(() => { %s.querySelector('.controls [data-action=%q]').click(); return true; })()`, tileJS(name), action)))
		require.NoError(t, err)
	}
	getUser, ok := live.users.CommandBreaker("GetUser")
	require.True(t, ok)
	mode := func() (string, error) { return getUser.Snapshot().Mode.String(), nil }
	click("GetUser", "force-open")
	waitFor(t, 5*time.Second, "forced open by the page", "forced-open", mode)
	waitFor(t, 5*time.Second, "tile shows it", "Forced Open", func() (string, error) { return tileState(ctx, "GetUser") })
	click("GetUser", "reset")
	waitFor(t, 5*time.Second, "reset by the page", "normal", mode)
	waitFor(t, 5*time.Second, "tile closed again", "Closed", func() (string, error) { return tileState(ctx, "GetUser") })
}
