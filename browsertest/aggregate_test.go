package browsertest

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/dashboard"
)

// fleetInstance serves a registry on a manual clock (its counts stay put)
// in which "Get" of group "api" ran ok successes and bad failures.
func fleetInstance(t *testing.T, ok, bad int) string {
	t.Helper()
	reg, _ := manualRegistry(t)
	api, err := reg.NewGroup("api", command.GroupConfig{MaxConcurrent: 4})
	require.NoError(t, err)
	runCalls(t, api, "Get", ok, bad)
	h, err := dashboard.New(reg, dashboard.Config{})
	require.NoError(t, err)
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		require.NoError(t, h.Close(context.Background()))
		ts.Close()
	})
	return ts.URL + dashboard.StreamPath
}

// TestBrowserAggregatedPage: bulwark's page renders the merged stream of
// three instances: the sum of their counts, "3 hosts", and the circuit
// open because one instance's breaker is.
func TestBrowserAggregatedPage(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped in -short mode")
	}
	urls := []string{fleetInstance(t, 7, 1), fleetInstance(t, 5, 25), fleetInstance(t, 11, 2)}
	agg, err := dashboard.NewAggregate(dashboard.AggregateConfig{Instances: urls})
	require.NoError(t, err)
	ts := httptest.NewServer(agg)
	defer ts.Close()
	defer func() { require.NoError(t, agg.Close(context.Background())) }()

	ctx := startChromium(t)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/")))
	read := func(sel string) func() (string, error) {
		return func() (string, error) {
			return chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(
				`(() => { const t = %s; return t ? t.querySelector(%q).textContent : ''; })()`, tileJS("Get"), sel)))
		}
	}
	waitFor(t, 20*time.Second, "hosts", "3 hosts", read(".hosts"))
	waitFor(t, 5*time.Second, "successes", "23", read(".c-success .v"))
	// The second instance's breaker opened after 15 of its 25 failures
	// (20 calls at 75 %): the other 10 calls were short-circuited.
	waitFor(t, 5*time.Second, "failures", "18", read(".c-failure .v"))
	waitFor(t, 5*time.Second, "short-circuited", "10", read(".c-short-circuited .v"))
	waitFor(t, 5*time.Second, "state", "Open", read(".state"))
	// 18 errors of 41 calls that ran: 43 %, the fleet's figure, not a sum
	// of the three instances' percentages.
	waitFor(t, 5*time.Second, "error %", "43%", read(".errpct"))
	rate, err := read(".rateval")()
	require.NoError(t, err)
	assert.Equal(t, "5.10", rate, "51 calls over the 10 s window, not over 30 s")
}

var fleetLine = regexp.MustCompile(`bulwark fleet view: (http://\S+/) `)

// TestFleetScreenshot makes docs/aggregate.png: it runs examples/fleetview
// (three instances and their merged page) for 40 s by default (payments
// fail on all three and the third one's breaker is open, so the merged
// tile shows Open; inventory has just recovered from its outage on the
// first instance and shows its last trip),
// then photographs the page in headless Chromium. It runs only when asked,
// from the repository root:
//
//	BULWARK_FLEET_SCREENSHOT=docs/aggregate.png go -C browsertest test -run TestFleetScreenshot -timeout 5m .
//
// BULWARK_FLEET_AFTER (a Go duration) changes the wait.
func TestFleetScreenshot(t *testing.T) {
	out := os.Getenv("BULWARK_FLEET_SCREENSHOT")
	if out == "" {
		t.Skip("set BULWARK_FLEET_SCREENSHOT=<file.png> to photograph the fleet view")
	}
	if !filepath.IsAbs(out) {
		out = filepath.Join("..", out) // tests run in browsertest/, the repository root is its parent
	}
	after := 40 * time.Second
	if v := os.Getenv("BULWARK_FLEET_AFTER"); v != "" {
		var err error
		after, err = time.ParseDuration(v)
		require.NoError(t, err, "BULWARK_FLEET_AFTER")
	}
	bin := filepath.Join(t.TempDir(), "fleetview")
	build, err := exec.Command("go", "build", "-o", bin, "github.com/bulwark-go/bulwark/examples/fleetview").CombinedOutput()
	require.NoError(t, err, "go build:\n%s", build)
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-quiet", "-duration", (after + time.Minute).String())
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	found := make(chan string, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := fleetLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	var url string
	select {
	case url = <-found:
	case <-exited:
		t.Fatal("fleetview ended before serving")
	case <-time.After(30 * time.Second):
		t.Fatal("fleetview printed no URL within 30 s")
	}

	ctx := startChromium(t)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(1440, 900),
		chromedp.Navigate(url+"?sort=name"),
	))
	time.Sleep(after)
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(out, png, 0o644))
	t.Logf("screenshot after %v: %s (%d bytes)", after, out, len(png))
}
