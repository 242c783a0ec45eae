package browsertest

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jitteryService serves 30 closed commands whose error % and volume jitter
// from frame to frame around steady values (error % 1 point apart, jitter
// ±2 points; volume ±10 %), as a live service's do. open and hot name a
// command to show open, and one to show at 50 % errors.
type jitteryService struct {
	*synthStream
	open, hot string
}

func serveJitteryService(t *testing.T) *jitteryService {
	tp := realTemplates(t)
	s := &jitteryService{}
	frame := func(now time.Time) []byte {
		k := float64(now.UnixMilli() / 100)
		var evs []map[string]any
		for i := range 30 {
			c := synthCmd{group: "api", name: fmt.Sprintf("Cmd%02d", i), strategy: "SEMAPHORE", sinceMs: 60000, timeoutMs: 1000}
			c.errPct = math.Round(float64(35-i) + 2*math.Sin(k*1.7+float64(i)))
			if c.name == s.hot {
				c.errPct = 50
			}
			calls := int64(200 + 20*math.Sin(k*2.3+float64(i)*0.7))
			c.failure = calls * int64(c.errPct) / 100
			c.success = calls - c.failure
			c.latency = [5]int64{5, 9, 20, 22, 40}
			if c.name == s.open {
				c.state, c.reason, c.tripAgoMs, c.openMs, c.retryAfterMs = "open", "error_ratio", 1000, 5000, 4000
			}
			evs = append(evs, tp.commandEvents(t, now, c)...)
		}
		return encodeEvents(evs)
	}
	s.synthStream = serveSynth(t, 250*time.Millisecond, nil, frame)
	return s
}

// order reads the order of the commands on the page: of the tiles, or of
// the table's rows.
func order(t *testing.T, ctx context.Context, attr string) string {
	t.Helper()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(
		`Array.from(document.querySelectorAll('[%s]')).map(e => e.getAttribute('%s')).join(',')`, attr, attr)))
	require.NoError(t, err)
	return got
}

// TestBrowserStableOrder: sorted by error % (the default), the page keeps
// its order while the values only jitter (nine samples a second apart, as
// the issue measured: the old page reordered in all nine), in the tiles
// and in the table; a command whose breaker opens moves to the top, and
// one whose error % jumps to another colour moves at once.
func TestBrowserStableOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped in -short mode")
	}
	s := serveJitteryService(t)
	ctx := startChromium(t)
	for _, view := range []struct{ query, attr string }{{"", "data-command"}, {"?view=table", "data-row"}} {
		require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1400, 1000), chromedp.Navigate(s.URL+view.query)))
		waitFor(t, 10*time.Second, "every command", "30 of 30", evalString(ctx, `document.getElementById('cmd-count').textContent`))
		first := order(t, ctx, view.attr)
		changed := 0
		for range 9 {
			time.Sleep(time.Second)
			if order(t, ctx, view.attr) != first {
				changed++
			}
		}
		assert.Zero(t, changed, "%s: the order changed in %d of 9 samples while only the values jittered", view.attr, changed)
		// CmdNN has error % 35-NN ± 2: sorted by the colour of the error %
		// (orange from 25 %, yellow from 10 %) as first seen, each command
		// is behind none of a worse colour, as far as the jitter tells.
		names := strings.Split(first, ",")
		for i := 1; i < len(names); i++ {
			var a, b int
			_, errA := fmt.Sscanf(names[i-1], "Cmd%d", &a)
			_, errB := fmt.Sscanf(names[i], "Cmd%d", &b)
			require.NoError(t, errA)
			require.NoError(t, errB)
			assert.GreaterOrEqual(t, colour(35-a+2), colour(35-b-2), "sorted by colour: %s", first)
		}
	}

	s.change(func() { s.open = "Cmd20" })
	waitFor(t, 10*time.Second, "the open breaker first", "Cmd20", func() (string, error) {
		o := order(t, ctx, "data-row")
		name, _, _ := strings.Cut(o, ",")
		return name, nil
	})
	s.change(func() { s.hot = "Cmd25" })
	waitFor(t, 10*time.Second, "red (50 % errors) next", "Cmd20,Cmd25", func() (string, error) {
		return strings.Join(strings.SplitN(order(t, ctx, "data-row"), ",", 3)[:2], ","), nil
	})
}

// colour is the page's health colour of an error %, worst highest.
func colour(pct int) int {
	switch {
	case pct >= 50:
		return 3
	case pct >= 25:
		return 2
	case pct >= 10:
		return 1
	}
	return 0
}
