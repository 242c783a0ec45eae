package browsertest

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/alert"
	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/dashboard"
	"github.com/bulwark-go/bulwark/metrics"
)

// tileText reads the text of the element matching selector in a command's
// tile ("" if the tile is not there yet).
func tileText(ctx context.Context, name, selector string) (string, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[string](
		`(() => { const t = `+tileJS(name)+`; return t ? t.querySelector('`+selector+`').textContent : ''; })()`))
}

// tileCounter reads the value of counter k (its CSS class suffix, as
// "rate-limited") in a command's tile.
func tileCounter(ctx context.Context, name, k string) func() (string, error) {
	return func() (string, error) { return tileText(ctx, name, ".counter.c-"+k+" .v") }
}

// tileShows serves reg's dashboard in the browser of ctx and waits until
// the tile of command name shows each counter of want (CSS class suffix →
// value), and the label of counter key reads label.
func tileShows(t *testing.T, ctx context.Context, reg *command.Registry, name, key, label string, want map[string]int) {
	t.Helper()
	url := serveRegistry(t, reg, dashboard.Config{})
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url+"/?delay=100")))
	for _, k := range slices.Sorted(maps.Keys(want)) {
		waitFor(t, 10*time.Second, k+" counter", strconv.Itoa(want[k]), tileCounter(ctx, name, k))
	}
	got, err := tileText(ctx, name, ".counter.c-"+key+" .k")
	require.NoError(t, err)
	assert.Equal(t, label, got)
}

// serveRegistry serves the dashboard of reg with cfg until the test ends,
// and returns its URL.
func serveRegistry(t *testing.T, reg *command.Registry, cfg dashboard.Config) string {
	h, err := dashboard.New(reg, cfg)
	require.NoError(t, err)
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, h.Close(ctx))
		ts.Close()
	})
	return ts.URL
}

// TestBrowserProbesAndAlerts: a command whose breaker has been open a
// minute shows its probe counts and alert tier P3; a command over 5%
// degraded shows its degraded alarm. The breakers run on a manual clock.
func TestBrowserProbesAndAlerts(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped in -short mode")
	}
	ctx := startChromium(t)
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { assert.NoError(t, reg.Close(context.Background())) })
	alerts, err := alert.New(alert.Config{Interval: time.Hour})
	require.NoError(t, err)
	g, err := reg.NewGroup("payments", command.GroupConfig{
		Strategy:       command.Semaphore,
		CommandBreaker: circuit.Config{MinRequests: 1, OpenDuration: time.Minute, HalfOpenSuccesses: 2},
		Alerts:         alerts,
	})
	require.NoError(t, err)
	errDown := errors.New("connection refused")
	fails := command.Func("Pay", func(context.Context) (int, error) { return 0, errDown }, nil)
	works := command.Func("Pay", func(context.Context) (int, error) { return 1, nil }, nil)

	_, _ = command.Execute(context.Background(), g, fails) // trips Pay
	clock.Advance(time.Minute)
	_, err = command.Execute(context.Background(), g, works) // probe 1: success
	require.NoError(t, err)
	_, _ = command.Execute(context.Background(), g, fails) // probe 2: fails, reopens
	degraded := command.Func("Read",
		func(context.Context) (int, error) { return 0, errDown },
		func(context.Context, error) (int, error) { return 0, nil })
	reads := command.Func("Read", func(context.Context) (int, error) { return 1, nil }, nil)
	for range 19 {
		_, _ = command.Execute(context.Background(), g, reads)
	}
	for range 2 {
		_, _ = command.Execute(context.Background(), g, degraded)
	}
	alerts.Check()

	url := serveRegistry(t, reg, dashboard.Config{})
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(1400, 1000),
		chromedp.Navigate(url+"/?delay=100"),
	))

	waitFor(t, 10*time.Second, "Pay probes", "probes 2 (1 ok, 1 failed)", func() (string, error) {
		return tileText(ctx, "Pay", ".probes")
	})
	waitFor(t, 10*time.Second, "Pay alert", "alert P3", func() (string, error) { return tileText(ctx, "Pay", ".alert") })
	tier, err := chromedp.Run(ctx, chromedp.Evaluate[string](tileJS("Pay")+`.querySelector('.alert').dataset.tier`))
	require.NoError(t, err)
	assert.Equal(t, "P3", tier)
	waitFor(t, 10*time.Second, "Read alarm", "degraded alarm", func() (string, error) { return tileText(ctx, "Read", ".alert") })
	probes, err := tileText(ctx, "Read", ".probes")
	require.NoError(t, err)
	assert.Empty(t, probes, "no probes, no probe line")
}
