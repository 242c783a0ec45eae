package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/dashboard"
)

// tileJS returns a JavaScript expression for the tile of command name: found
// by comparing data-command values, so no name needs CSS escaping.
func tileJS(name string) string {
	lit, _ := json.Marshal(name)
	return fmt.Sprintf(`Array.from(document.querySelectorAll('[data-command]')).find(e => e.dataset.command === %s)`, lit)
}

// tileState reads the circuit state shown on a command's tile ("" if the
// tile is not there yet).
func tileState(ctx context.Context, name string) (string, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[string](
		fmt.Sprintf(`(() => { const t = %s; return t ? t.querySelector('.state').textContent : ''; })()`, tileJS(name))))
}

// waitFor polls read until it returns want, or fails after d.
func waitFor(t *testing.T, d time.Duration, what, want string, read func() (string, error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	var got string
	var err error
	for time.Now().Before(deadline) {
		if got, err = read(); err == nil && got == want {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: want %q within %v, last read %q (err %v)", what, want, d, got, err)
}

// screenshotPath is $BULWARK_SCREENSHOT (relative to the repository root
// when relative), else a file in a temporary directory.
func screenshotPath(t *testing.T) string {
	p := os.Getenv("BULWARK_SCREENSHOT")
	if p == "" {
		return filepath.Join(t.TempDir(), "dashboard.png")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join("..", p) // tests run in browsertest/, the repository root is its parent
	}
	return p
}

// liveCommands runs calls of a few commands in a real registry until the
// test ends.
type liveCommands struct {
	reg       *command.Registry
	users     *command.Group
	cache     *command.Group
	failList  atomic.Bool // ListUsers fails while set
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	completed atomic.Int64
}

// xssName is a command name that would be an element if the page parsed
// names as HTML.
const xssName = `<img src=x onerror=alert(1)>`

type namedCall struct {
	name string
	fail *atomic.Bool
}

func (c namedCall) Name() string { return c.name }
func (c namedCall) Run(ctx context.Context) (int, error) {
	select {
	case <-time.After(2 * time.Millisecond):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if c.fail != nil && c.fail.Load() {
		return 0, errors.New("dependency down")
	}
	return 1, nil
}

func startLiveCommands(t *testing.T) *liveCommands {
	t.Helper()
	l := &liveCommands{reg: command.NewRegistry(command.RegistryConfig{Logger: slog.New(slog.DiscardHandler)})}
	// A breaker that trips fast and stays open for the test's duration.
	breaker := circuit.Config{MinRequests: 5, OpenDuration: time.Minute}
	var err error
	l.users, err = l.reg.NewGroup("users", command.GroupConfig{MaxConcurrent: 8, CommandBreaker: breaker})
	require.NoError(t, err)
	l.cache, err = l.reg.NewGroup("cache", command.GroupConfig{Strategy: command.Semaphore, CommandBreaker: breaker})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	loop := func(g *command.Group, cmd namedCall) {
		l.wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := command.Execute(ctx, g, cmd); err == nil {
					l.completed.Add(1)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	loop(l.users, namedCall{name: "GetUser"})
	loop(l.users, namedCall{name: "ListUsers", fail: &l.failList})
	loop(l.users, namedCall{name: "DeleteUser"})
	loop(l.cache, namedCall{name: xssName})
	t.Cleanup(l.stop)
	return l
}

func (l *liveCommands) stop() {
	l.cancel()
	l.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = l.reg.Close(ctx)
}

// switchable serves h, or 503 while down is set: a stream outage the page
// must ride out.
type switchable struct {
	h    http.Handler
	down atomic.Bool
}

// cuttable records every connection it accepts, so that a test can cut
// them all: httptest.Server.CloseClientConnections leaves out the stream
// connections the dashboard takes over from net/http.
type cuttable struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *cuttable) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

// cut closes every connection accepted so far.
func (l *cuttable) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.conns = nil
}

func (s *switchable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.down.Load() {
		http.Error(w, "down for the test", http.StatusServiceUnavailable)
		return
	}
	s.h.ServeHTTP(w, r)
}

func TestBrowserDashboard(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped in -short mode")
	}
	ctx := startChromium(t)
	live := startLiveCommands(t)
	h, err := dashboard.New(live.reg, dashboard.Config{})
	require.NoError(t, err)
	sw := &switchable{h: h}
	ts := httptest.NewUnstartedServer(sw) // listens on 127.0.0.1
	ln := &cuttable{Listener: ts.Listener}
	ts.Listener = ln
	ts.Start()
	defer func() {
		// The page holds its stream open and reconnects: turn it away
		// and end its stream before closing the server.
		sw.down.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, h.Close(ctx))
		ts.Close()
	}()

	// Any alert() would mean a name ran as HTML: record and dismiss it.
	var dialogs atomic.Int32
	dialogCtx, stopDialogs := context.WithCancel(ctx)
	dialogEvents := chromedp.Events(dialogCtx, page.JavascriptDialogOpening)
	dialogDone := make(chan struct{})
	go func() {
		defer close(dialogDone)
		for _, err := range dialogEvents {
			if err != nil {
				return
			}
			dialogs.Add(1)
			_, _ = chromedp.Call(dialogCtx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	defer func() {
		stopDialogs()
		<-dialogDone
	}()

	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(1400, 1000),
		chromedp.Navigate(ts.URL+"/?delay=100"),
	))

	// Every command shows up, closed.
	for _, name := range []string{"GetUser", "ListUsers", "DeleteUser", xssName} {
		waitFor(t, 10*time.Second, name+" tile", "Closed", func() (string, error) { return tileState(ctx, name) })
	}
	conn, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.ID("conn"), "data-conn"))
	require.NoError(t, err)
	assert.Equal(t, "live", conn.Value)

	// Failures trip ListUsers' breaker; forcing DeleteUser's shows as forced.
	live.failList.Store(true)
	waitFor(t, 10*time.Second, "ListUsers after failures", "Open", func() (string, error) { return tileState(ctx, "ListUsers") })
	del, ok := live.users.CommandBreaker("DeleteUser")
	require.True(t, ok)
	del.SetMode(circuit.ForcedOpen)
	waitFor(t, 10*time.Second, "DeleteUser forced", "Forced Open", func() (string, error) { return tileState(ctx, "DeleteUser") })
	trip, err := chromedp.Run(ctx, chromedp.Evaluate[string](tileJS("ListUsers")+`.querySelector('.trip').textContent`))
	require.NoError(t, err)
	assert.Contains(t, trip, "error_ratio", "the tile tells why it tripped")
	attr, err := chromedp.Run(ctx, chromedp.Evaluate[string](tileJS("ListUsers")+`.dataset.state`))
	require.NoError(t, err)
	assert.Equal(t, "open", attr)

	// The hostile name is text: no element came out of it, no alert fired.
	xss, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](fmt.Sprintf(`(() => {
		const t = %s;
		return {name: t.querySelector('.name').textContent, imgs: t.querySelectorAll('img').length,
		        pageImgs: document.images.length};
	})()`, tileJS(xssName))))
	require.NoError(t, err)
	assert.Equal(t, xssName, xss["name"])
	assert.EqualValues(t, 0, xss["imgs"], "no <img> in the tile")
	assert.EqualValues(t, 0, xss["pageImgs"], "no <img> anywhere")

	// The filter box hides what does not match.
	require.NoError(t, chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("filter"), "list")))
	waitFor(t, 5*time.Second, "filtered tiles", "ListUsers", func() (string, error) {
		return chromedp.Run(ctx, chromedp.Evaluate[string](
			`Array.from(document.querySelectorAll('#commands [data-command]')).filter(e => !e.hidden).map(e => e.dataset.command).join(',')`))
	})
	require.NoError(t, chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](
		`(() => { const f = document.getElementById('filter'); f.value = ''; f.dispatchEvent(new Event('input')); })()`)))

	// The stream goes down: the badge says so; it comes back by itself.
	sw.down.Store(true)
	ln.cut()
	waitFor(t, 10*time.Second, "badge while the stream is down", "reconnecting", func() (string, error) {
		a, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.ID("conn"), "data-conn"))
		return a.Value, err
	})
	sw.down.Store(false)
	waitFor(t, 15*time.Second, "badge after the stream is back", "live", func() (string, error) {
		a, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.ID("conn"), "data-conn"))
		return a.Value, err
	})
	waitFor(t, 10*time.Second, "ListUsers after reconnecting", "Open", func() (string, error) { return tileState(ctx, "ListUsers") })

	assert.Zero(t, dialogs.Load(), "a name ran as script")
	assert.Positive(t, live.completed.Load())

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	out := screenshotPath(t)
	require.NoError(t, os.WriteFile(out, png, 0o644))
	t.Logf("screenshot: %s (%d bytes)", out, len(png))
}
