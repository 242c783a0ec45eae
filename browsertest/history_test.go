package browsertest

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/dashboard"
)

// TestBrowserSparklineFullOnFirstPaint: the stream records each command's
// history while nobody watches (KeepHistory), and a page opened later draws
// that history on its first paint, not only the points it saw itself.
func TestBrowserSparklineFullOnFirstPaint(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped in -short mode")
	}
	live := startLiveCommands(t)
	h, err := dashboard.New(live.reg, dashboard.Config{
		// 100 ms steps over 12 s: 2 s of recording give about 20 points.
		History: 12 * time.Second, HistoryStep: 100 * time.Millisecond,
	})
	require.NoError(t, err)
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer h.Close(context.Background())

	kctx, stopKeeping := context.WithCancel(context.Background())
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		_ = h.Stream().KeepHistory(kctx)
	}()
	defer func() { stopKeeping(); <-kept }()
	time.Sleep(2 * time.Second)

	ctx := startChromium(t)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/")))
	// The first paint with the tile: read its error line's points at once.
	// The page adds one point per frame it gets (500 ms apart), so more
	// than a few points can only come from the server's history.
	points := fmt.Sprintf(`(() => { const t = %s; if (!t) return -1;
		const d = t.querySelector('path.errline').getAttribute('d') || '';
		return d ? d.split('L').length : 0; })()`, tileJS("GetUser"))
	var n int
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		n, err = chromedp.Run(ctx, chromedp.Evaluate[int](points))
		if err == nil && n >= 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, 12, "the sparkline holds the server's history on first paint")

	age, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(
		`(() => { const d = %s.querySelector('path.errline').getAttribute('d'); return d.slice(1, d.indexOf(',')); })()`,
		tileJS("GetUser"))))
	require.NoError(t, err)
	assert.False(t, strings.HasPrefix(age, "240"), "the first point is older than the page: x %s is left of the right edge", age)
}
