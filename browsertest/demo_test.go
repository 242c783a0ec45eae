package browsertest

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// buildDemo compiles the demo program (examples/dashboard) into the test's
// temporary directory and returns the binary's path. go test puts its own
// go command first on $PATH.
func buildDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dashboard")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/bulwark-go/bulwark/examples/dashboard").CombinedOutput()
	require.NoError(t, err, "go build of the demo:\n%s", out)
	return bin
}

// demo is the demo program running as a process.
type demo struct {
	url    string // http://127.0.0.1:port/
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has ended; err, stdout and stderr are then set
	err    error         // what Wait returned: nil for exit status 0
	stdout string
	stderr strings.Builder
}

var urlLine = regexp.MustCompile(`bulwark dashboard: (http://\S+/) `)

// startDemo runs the demo binary with args (plus -addr 127.0.0.1:0 -quiet)
// and waits for the URL it prints. The process is killed when the test ends
// if it is still running.
func startDemo(t *testing.T, bin string, args ...string) *demo {
	t.Helper()
	d := &demo{exited: make(chan struct{})}
	d.cmd = exec.Command(bin, append([]string{"-addr", "127.0.0.1:0", "-quiet"}, args...)...)
	d.cmd.Stderr = &d.stderr // read only after exited is closed
	stdout, err := d.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, d.cmd.Start())
	found := make(chan string, 1)
	go func() {
		defer close(d.exited)
		var lines []string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if m := urlLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		d.err = d.cmd.Wait() // after the last read, as StdoutPipe requires
		d.stdout = strings.Join(lines, "\n")
	}()
	t.Cleanup(func() {
		_ = d.cmd.Process.Kill() // fails harmlessly when it has exited
		<-d.exited
	})
	select {
	case d.url = <-found:
	case <-d.exited:
		t.Fatalf("demo ended before serving: %v\n%s%s", d.err, d.stdout, d.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("demo printed no URL within 30 s")
	}
	return d
}

// stop sends sig to the demo and waits for it to end, failing the test if
// it runs on for more than within. d.err, d.stdout and d.stderr are then set.
func (d *demo) stop(t *testing.T, sig os.Signal, within time.Duration) {
	t.Helper()
	require.NoError(t, d.cmd.Process.Signal(sig))
	select {
	case <-d.exited:
	case <-time.After(within):
		t.Fatalf("demo still running %v after %v", within, sig)
	}
}

// TestDemoHelpExitsZero: -h prints the flags and exits 0, like every Go tool.
func TestDemoHelpExitsZero(t *testing.T) {
	out, err := exec.Command(buildDemo(t), "-h").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "-addr")
	assert.Contains(t, string(out), "-duration")
}

// TestDemoStopsCleanlyOnSignal: Ctrl-C (SIGINT) and SIGTERM stop the demo
// with exit status 0 and no error, while it serves.
func TestDemoStopsCleanlyOnSignal(t *testing.T) {
	bin := buildDemo(t)
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			d := startDemo(t, bin, "-duration", "5m")
			resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get(d.url)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode)

			d.stop(t, sig, 30*time.Second)
			require.NoError(t, d.err, "exit status after %v:\n%s\n%s", sig, d.stdout, d.stderr.String())
			assert.Empty(t, d.stderr.String(), "nothing on stderr (errors go there)")
		})
	}
}

// TestDemoScreenshot makes docs/dashboard.png and, beside it,
// docs/dashboard-table.png: it runs the demo twice at once, as it is (six
// commands) and with -commands 300, lets both run 3m50s by default (the
// sparklines then hold two minutes of steady running, and at second 50 of
// the minute the six-command demo's inventory breaker is open, its
// recommendations degraded, its reports pool rejecting, its search calls
// timing out and detached; some of the 300 have outages at any time),
// then photographs the first's page whole in tiles, and the first screen
// of the second's in the table, by group. It runs only when asked, from
// the repository root:
//
//	BULWARK_DEMO_SCREENSHOT=docs/dashboard.png go -C browsertest test -run TestDemoScreenshot -timeout 10m .
//
// A relative path is taken from the repository root. BULWARK_DEMO_AFTER (a
// Go duration) changes the wait.
func TestDemoScreenshot(t *testing.T) {
	out := os.Getenv("BULWARK_DEMO_SCREENSHOT")
	if out == "" {
		t.Skip("set BULWARK_DEMO_SCREENSHOT=<file.png> to photograph the demo")
	}
	if !filepath.IsAbs(out) {
		out = filepath.Join("..", out) // tests run in browsertest/, the repository root is its parent
	}
	tableOut := strings.TrimSuffix(out, filepath.Ext(out)) + "-table" + filepath.Ext(out)
	after := 3*time.Minute + 50*time.Second
	if v := os.Getenv("BULWARK_DEMO_AFTER"); v != "" {
		var err error
		after, err = time.ParseDuration(v)
		require.NoError(t, err, "BULWARK_DEMO_AFTER")
	}
	bin := buildDemo(t)
	run := (after + time.Minute).String()
	small := startDemo(t, bin, "-duration", run)
	large := startDemo(t, bin, "-duration", run, "-commands", "300")
	time.Sleep(after)

	ctx := startChromium(t)
	// The pages open at the end: the history the demos kept fills their
	// sparklines at once.
	shoot := func(url, file string, full bool) {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1440, 900), chromedp.Navigate(url)))
		time.Sleep(3 * time.Second) // a few frames: rates and states settle
		var png []byte
		var err error
		if full {
			png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
		} else {
			png, err = chromedp.Run(ctx, chromedp.CaptureScreenshot())
		}
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(file, png, 0o644))
		t.Logf("screenshot after %v: %s (%d bytes)", after, file, len(png))
	}
	shoot(small.url+"?sort=name", out, true)
	shoot(large.url+"?view=table&group=1", tableOut, false)

	for _, d := range []*demo{small, large} {
		d.stop(t, os.Interrupt, 30*time.Second)
		require.NoError(t, d.err, "demo exit after Ctrl-C:\n%s\n%s", d.stdout, d.stderr.String())
	}
}
