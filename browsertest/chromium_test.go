package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// skipOrFail skips the test when the browser is missing on a developer's
// machine, and fails it in CI (CI set), where a missing browser is a broken
// setup, not a reason to pass.
func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "" {
		t.Skipf(format, args...)
	}
	t.Fatalf(format, args...)
}

// removeProfile removes a stopped browser's profile directory. The browser's
// main process has exited by then, but its helpers (utility processes, the
// crash handler, reparented to init) can still be writing into the profile
// for a moment, so a removal that finds a directory refilled is tried again
// until wait has passed; t.TempDir's single RemoveAll failed the test
// ("directory not empty") when it raced them.
func removeProfile(dir string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		err := os.RemoveAll(dir)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("profile %s still written to %v after the browser stopped: %w", dir, wait, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// chromiumPath finds the browser: $BULWARK_CHROMIUM, then the usual names on
// $PATH, then /usr/bin/chromium.
func chromiumPath() (string, error) {
	if p := os.Getenv("BULWARK_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium", nil
	}
	return "", errors.New("no chromium on $PATH nor at /usr/bin/chromium (set BULWARK_CHROMIUM)")
}

// startChromium starts headless Chromium with a fresh profile directory and
// returns a tab context; the browser is stopped when the test ends, and its
// profile removed. A browser that cannot be found or started skips the
// test, or fails it under CI.
func startChromium(t testing.TB) context.Context {
	t.Helper()
	path, err := chromiumPath()
	if err != nil {
		skipOrFail(t, "browser test: %v", err)
	}
	profile, err := os.MkdirTemp("", "bulwark-chromium-")
	if err != nil {
		t.Fatalf("browser test: profile directory: %v", err)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
	)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for the browser process to exit
		if err := removeProfile(profile, 10*time.Second); err != nil {
			t.Errorf("browser test: %v", err)
		}
	})
	// The first Do starts the browser and binds its life to ctx: no timeout
	// context here, or the browser would end with it.
	if err := chromedp.Do(ctx); err != nil {
		skipOrFail(t, "browser test: cannot start %s: %v", path, err)
	}
	return ctx
}
