package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/browsertest"
)

// TestDemoScreenshot makes docs/dashboard.png: it runs the demo, lets its
// dependencies fail for a while (50 s by default: the inventory breaker is
// then open, its open duration backed off from 5 s to 10 s after a failed
// probe; the recommendations are degraded, the reports pool rejects, search
// calls time out and stay detached),
// then photographs the page in headless Chromium. It runs only when asked:
//
//	BULWARK_DEMO_SCREENSHOT=docs/dashboard.png go test -run TestDemoScreenshot -timeout 5m ./examples/dashboard/
//
// A relative path is taken from the module root. BULWARK_DEMO_AFTER (a Go
// duration) changes the wait.
func TestDemoScreenshot(t *testing.T) {
	out := os.Getenv("BULWARK_DEMO_SCREENSHOT")
	if out == "" {
		t.Skip("set BULWARK_DEMO_SCREENSHOT=<file.png> to photograph the demo")
	}
	if !filepath.IsAbs(out) {
		out = filepath.Join("..", "..", out) // tests run in examples/dashboard/
	}
	after := 50 * time.Second
	if v := os.Getenv("BULWARK_DEMO_AFTER"); v != "" {
		var err error
		after, err = time.ParseDuration(v)
		require.NoError(t, err, "BULWARK_DEMO_AFTER")
	}
	d := startDemo(t, "-duration", (after + time.Minute).String())
	defer func() {
		d.stop()
		require.NoError(t, d.wait(t, 15*time.Second))
	}()

	ctx := browsertest.Start(t)

	// The page opens at once, so its sparklines cover the whole run.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(1440, 900),
		chromedp.Navigate(d.url+"?sort=name"),
	))
	time.Sleep(after)
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(out, png, 0o644))
	t.Logf("screenshot after %v: %s (%d bytes)", after, out, len(png))
}
