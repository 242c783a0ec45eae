package browsertest

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// largeService describes n commands over groups of 15: every state,
// mode and policy the page shows, counters from 0 to tens of millions,
// latencies from none to minutes, names from short to very long, features
// on and off, after ten minutes of running (times in state, trips ten
// minutes ago).
func largeService(n int) ([]synthCmd, []synthGroup) {
	services := []string{"users", "payments", "search", "inventory", "reports", "recommendations", "catalog",
		"orders", "shipping", "pricing", "auth", "notifications", "media", "reviews", "cart", "ledger", "fraud",
		"geo", "profile", "analytics-ingest-pipeline-europe-west-primary"}
	verbs := []string{"Get", "List", "Create", "Update", "Delete", "Search", "Sync", "Validate", "Count", "Lookup",
		"Refresh", "Export", "Import", "Reserve", "Cancel"}
	nouns := []string{"Item", "Batch", "Summary", "Status", "Detail", "IndexEntries", "Quote", "Token", "Event",
		"RecordsForAccount", "Preview", "Report", "History", "Settings", "Snapshot"}
	const tenMin = 10 * 60 * 1000
	var cmds []synthCmd
	var groups []synthGroup
	for i := range n {
		gi := i / 15
		group := services[gi%len(services)]
		if gi >= len(services) {
			group = fmt.Sprintf("%s-%d", group, gi/len(services)+1)
		}
		strategy := "THREAD"
		if gi%3 == 2 {
			strategy = "SEMAPHORE"
		}
		if i%15 == 0 {
			g := synthGroup{name: group, strategy: strategy, capacity: 10 + gi, active: gi % 11, largest: 10 + gi,
				completed: int64(1234567 * (gi + 1)), rollingRejected: int64(gi * 1000 % 7777), executed: int64(500 * gi),
				sinceMs: tenMin + int64(gi)*1000}
			if strategy == "THREAD" {
				g.queueCapacity = 50
				g.queued = gi * 7 % 51
				g.detached = gi % 4
			}
			if gi == 4 {
				g.state = "open"
			}
			groups = append(groups, g)
		}
		name := verbs[i%len(verbs)] + nouns[(i/len(verbs)+i)%len(nouns)]
		switch {
		case i == 7:
			name = xssName
		case i%37 == 5:
			name = "Get" + strings.Repeat("VeryLongDependencyName", 4) + fmt.Sprint(i)
		default:
			name += fmt.Sprint(i)
		}
		c := synthCmd{group: group, name: name, strategy: strategy, sinceMs: tenMin + int64(i)*1000, hosts: 1}
		scale := int64(math.Pow(10, float64(i%8)))
		c.success = 7 * scale
		c.failure = scale / 10 * int64(i%4)
		c.latency = [5]int64{int64(3 + i%40), int64(10 + i%90), int64(40 + i%400), int64(60 + i%900), int64(200 + i*37%9000)}
		c.mean = c.latency[0] + 2
		c.timeoutMs = int64(250 * (1 + i%8))
		c.inFlight = int64(i % 9)
		if i%5 == 0 {
			c.timeoutMs = 0 // no timeout configured
		} else {
			c.timeout = scale / 100 * int64(i%3)
		}
		if strategy == "THREAD" {
			c.rejected = scale / 50 * int64(i%2)
		}
		if i%3 == 0 {
			c.fallback = c.failure + c.timeout
			c.degraded = 0.0731
		}
		if i%9 == 0 {
			c.badRequest = 12345
		}
		if i%10 == 0 {
			c.cancelled = 99999
		}
		if i%6 == 0 {
			c.rateLimited = 123456
		}
		if i%8 == 0 {
			c.retried = 8888888
		}
		if i%4 == 0 {
			c.slowMs = 150
			c.slowRatio = 0.125
		}
		if i%11 == 0 {
			c.detached = 3
		}
		if i%13 == 0 {
			c.hosts = 12
		}
		if requests := c.success + c.failure + c.timeout; requests > 0 {
			c.errPct = float64(100 * (c.failure + c.timeout) / requests)
		}
		if i%17 == 0 {
			c.latency = [5]int64{61000, 95000, 119000, 125000, 600000} // a dependency that hangs for minutes
			c.mean = 70000
		}
		switch {
		case i%23 == 0:
			c.state, c.reason = "open", "error_ratio"
			c.shortCircuited = 45678
			c.retryAfterMs, c.openMs = 49*60*1000+55000, 60*60*1000
			c.tripAgoMs = tenMin
			c.alertTier = "P2"
			c.errPct = 100
		case i%29 == 0:
			c.state, c.reason = "half-open", "open_duration_elapsed"
			c.probes, c.probeOK, c.probesNeeded = 2, 1, 3
			c.tripAgoMs = tenMin - 30000
			c.probeCount, c.probeSuccess, c.probeFails = 1234, 1200, 34
		case i%31 == 0:
			c.mode, c.state = "forced-open", "open"
			c.shortCircuited = 999999
		case i%41 == 0:
			c.mode = "forced-closed"
		case i%43 == 0:
			c.mode, c.state, c.breakerOff = "observe-only", "open", true
		case i%47 == 0:
			c.rampShare = 0.35
			c.reason = "probes_succeeded"
		case i%53 == 0:
			c.warmUpLeftMs = 4*60*1000 + 59000
		case i%59 == 0:
			c.state, c.reason = "open", "slow_ratio"
			c.healthCheck = "1234 checks, 1234 failed; last failed: dial tcp 10.20.30.40:5432: connect: connection refused (after 3 attempts over 2.5s)"
			c.tripAgoMs = tenMin
		}
		if i%61 == 0 {
			c.shared = "shared state: degraded (redis 10.0.0.7:6379: i/o timeout), deciding locally"
		}
		if i%12 == 0 && c.fallback > 0 {
			c.degradedAlarm = true
		}
		if gi == 4 {
			c.groupState = "open"
		}
		if i%19 == 0 {
			// Declared, never called: nothing in the window.
			c.success, c.failure, c.timeout, c.rejected, c.shortCircuited = 0, 0, 0, 0, 0
			c.badRequest, c.fallback, c.cancelled, c.rateLimited, c.retried = 0, 0, 0, 0, 0
			c.errPct, c.latency, c.mean, c.degraded, c.slowRatio = 0, [5]int64{}, 0, 0, 0
			c.degradedAlarm, c.inFlight = false, 0
		}
		cmds = append(cmds, c)
	}
	return cmds, groups
}

// serveLargeService serves n commands of largeService, with ten minutes of
// history each, a frame every 2 s. Every frame is the same: the times
// in state and since the trips are those of a service ten minutes in.
func serveLargeService(t *testing.T, n int) *synthStream {
	tp := realTemplates(t)
	cmds, groups := largeService(n)
	now := time.Now()
	var history, frame []map[string]any
	for i, c := range cmds {
		base := float64(c.success+c.failure+c.timeout+c.rejected+c.shortCircuited) / 10
		history = append(history, historyEvent(c.group, c.name, now, 10*time.Minute, time.Second,
			func(ago time.Duration) float64 { return base * (1 + 0.4*math.Sin(ago.Seconds()/20+float64(i))) },
			func(ago time.Duration) float64 {
				if int(ago.Seconds())%90 < 15 {
					return base * 0.3
				}
				return base * c.errPct / 100
			}))
		frame = append(frame, tp.commandEvents(t, now, c)...)
	}
	for _, g := range groups {
		frame = append(frame, tp.groupEvents(t, now, g)...)
	}
	historyData, frameData := encodeEvents(history), encodeEvents(frame)
	return serveSynth(t, 2*time.Second,
		func(time.Time) []byte { return historyData },
		func(time.Time) []byte { return frameData })
}

// layoutJS checks what is on screen: the tiles, rows, group headings and
// the bar. Within each, no two boxes (texts, badges, buttons, sparklines,
// circles) overlap, each lies inside its container, and no text is cut off
// by an ancestor that hides overflow, unless it ends in an ellipsis with
// the whole text in its title. Containers do not overlap one another, the
// page is no wider than the window, and each tile and row on screen has
// drawn its sparkline over the whole two minutes. It returns the problems
// found (at most 20) and how many containers it checked.
const layoutJS = `(() => {
  const problems = [];
  const report = (msg) => { if (problems.length < 20) problems.push(msg); };
  const vh = innerHeight;
  const BOX = 'svg, .state, .badge, button, input, select, .gauge, .hdot';
  const ROOTS = '.bar, .tile, .ghead, .tr';
  const tol = 0.5;
  const visible = (r) => r.width > 0 && r.height > 0;
  const onScreen = (r) => visible(r) && r.bottom > 0 && r.top < vh;
  const inside = (a, b) => a.left >= b.left - tol && a.right <= b.right + tol && a.top >= b.top - tol && a.bottom <= b.bottom + tol;
  const overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1 && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
  const where = (e) => {
    const c = e.closest('[data-command],[data-row],[data-pool],[data-queue],[data-section]');
    const id = c ? (c.dataset.command || c.dataset.row || c.dataset.pool || c.dataset.queue || c.dataset.section) : '';
    return (c ? c.className + ' "' + id + '" ' : '') + (e.className && e.className.baseVal !== undefined ? e.className.baseVal : e.className);
  };
  const text = (l) => l.node ? JSON.stringify(l.node.textContent.slice(0, 40)) : '<' + l.e.tagName.toLowerCase() + '>';
  // An element cut short with an ellipsis is fine when its title holds
  // the whole text.
  const ellipsized = (e) => e.title && e.title === e.textContent && getComputedStyle(e).textOverflow === 'ellipsis';

  function leaves(root) {
    const out = [];
    for (const e of root.querySelectorAll(BOX)) {
      if (e.parentElement.closest(BOX)) continue;
      const r = e.getBoundingClientRect();
      if (visible(r)) out.push({ e, r });
    }
    const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let n; (n = walk.nextNode()); ) {
      if (!n.textContent.trim()) continue;
      const p = n.parentElement;
      if (p.closest(BOX) || p.closest('option')) continue;
      const range = document.createRange();
      range.selectNodeContents(n);
      const clip = ellipsized(p) ? p.getBoundingClientRect() : null;
      for (let r of range.getClientRects()) {
        if (!visible(r)) continue;
        if (clip) r = new DOMRect(r.left, r.top, Math.min(r.right, clip.right) - r.left, r.height);
        out.push({ e: p, node: n, r });
      }
    }
    return out;
  }

  // clipper returns the nearest ancestor of e, up to root, that hides what
  // overflows it.
  function clipper(e, root) {
    for (let a = e; a && a !== root.parentElement; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.overflowX !== 'visible' || s.overflowY !== 'visible') return a;
    }
    return null;
  }

  const roots = [];
  for (const root of document.querySelectorAll(ROOTS)) {
    const rr = root.getBoundingClientRect();
    if (!onScreen(rr)) continue;
    if (root.parentElement.closest(ROOTS)) continue;
    roots.push({ root, r: rr });
    const ls = leaves(root);
    for (const l of ls) {
      if (!inside(l.r, rr)) report('outside its box: ' + text(l) + ' in ' + where(l.e));
      if (l.node && !ellipsized(l.e)) {
        const c = clipper(l.e, root);
        if (c && !inside(l.r, c.getBoundingClientRect())) report('cut off: ' + text(l) + ' in ' + where(l.e));
      }
    }
    for (let i = 0; i < ls.length; i++) {
      for (let j = i + 1; j < ls.length; j++) {
        const a = ls[i], b = ls[j];
        if (a.node && a.node === b.node) continue;
        if (a.e.contains(b.e) && !a.node || b.e.contains(a.e) && !b.node) continue;
        if (overlap(a.r, b.r)) report('overlap: ' + text(a) + ' (' + where(a.e) + ') and ' + text(b) + ' (' + where(b.e) + ')');
      }
    }
    if (root.matches('.tile.cmd, .cmdrow')) {
      const area = root.querySelector('path.area');
      const d = area && area.getAttribute('d') || '';
      const x0 = parseFloat(d.slice(1));
      if (!(x0 < 10)) report('sparkline not over two minutes (starts at x ' + x0 + '): ' + where(area || root));
    }
  }
  for (let i = 0; i < roots.length; i++) {
    for (let j = i + 1; j < roots.length; j++) {
      const a = roots[i], b = roots[j];
      if (a.root.contains(b.root) || b.root.contains(a.root)) continue;
      if (a.root.matches('.bar') || b.root.matches('.bar')) continue; // the bar sticks on top of what scrolls under it
      if (overlap(a.r, b.r)) report('containers overlap: ' + where(a.root) + ' and ' + where(b.root));
    }
  }
  if (document.documentElement.scrollWidth > innerWidth + 1) {
    report('page wider than the window: ' + document.documentElement.scrollWidth + ' > ' + innerWidth);
  }
  return { problems, checked: roots.length };
})()`

type layoutResult struct {
	Problems []string `json:"problems"`
	Checked  int      `json:"checked"`
}

// checkLayout scrolls the page from top to bottom, a window at a time,
// and checks each window with layoutJS, until it finds no problem or for
// 5 s: the tiles and rows that come on screen are drawn in the next
// animation frame. It returns the number of containers checked.
func checkLayout(t *testing.T, ctx context.Context, what string, shots string) int {
	t.Helper()
	height, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.documentElement.scrollHeight`))
	require.NoError(t, err)
	view, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`innerHeight`))
	require.NoError(t, err)
	checked := 0
	for y, step := 0.0, 0; y < height; y, step = y+view*0.8, step+1 {
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`window.scrollTo(0, %f), true`, y)))
		require.NoError(t, err)
		nextFrame(t, ctx)
		var res layoutResult
		deadline := time.Now().Add(5 * time.Second)
		for {
			res, err = chromedp.Run(ctx, chromedp.Evaluate[layoutResult](layoutJS))
			require.NoError(t, err)
			if len(res.Problems) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
			nextFrame(t, ctx)
		}
		if shots != "" && step < 2 {
			png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
			require.NoError(t, err)
			name := strings.NewReplacer(" ", "-", "/", "-").Replace(what)
			require.NoError(t, os.WriteFile(filepath.Join(shots, fmt.Sprintf("%s-%d.png", name, step)), png, 0o644))
		}
		if len(res.Problems) > 0 {
			t.Errorf("%s, scrolled to %.0f of %.0f px:\n  %s", what, y, height, strings.Join(res.Problems, "\n  "))
			return checked
		}
		checked += res.Checked
	}
	return checked
}

// nextFrame waits until the page has drawn two more frames: what a resize
// or a scroll changed is then laid out.
func nextFrame(t *testing.T, ctx context.Context) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
		`new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
}

// TestBrowserLayoutNoOverlap: with 300 commands after ten minutes of
// history, in tiles and in the table, flat and by group, at widths from
// 1024 to 2560 px, nothing on the page overlaps, spills out of its box or
// is cut off (see layoutJS). BULWARK_LAYOUT_SHOTS=<dir> keeps a screenshot
// of the top of each view at each width, to look at.
func TestBrowserLayoutNoOverlap(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped in -short mode")
	}
	const n = 300
	s := serveLargeService(t, n)
	ctx := startChromium(t)
	shots := os.Getenv("BULWARK_LAYOUT_SHOTS")
	// 1272 px: four columns of tiles at their narrowest (300 px).
	all := []int64{1024, 1272, 1400, 1920, 2560}
	for _, v := range []struct {
		name, query string
		widths      []int64
	}{
		{"tiles", "", all},
		{"tiles by group", "group=1", []int64{1024, 2560}},
		{"table", "view=table", []int64{1024, 1400, 2560}},
		{"table by group", "view=table&group=1", []int64{1024}},
	} {
		require.NoError(t, chromedp.Do(ctx,
			chromedp.EmulateViewport(v.widths[0], 2400),
			chromedp.Navigate(s.URL+"?"+v.query),
		))
		waitFor(t, 20*time.Second, v.name+": every command", fmt.Sprintf("%d of %d", n, n), evalString(ctx,
			`document.getElementById('cmd-count').textContent`))
		for _, w := range v.widths {
			require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(w, 2400)))
			nextFrame(t, ctx)
			began := time.Now()
			checked := checkLayout(t, ctx, fmt.Sprintf("%s at %d px", v.name, w), shots)
			t.Logf("%s at %d px: %d containers checked in %v", v.name, w, checked, time.Since(began).Round(time.Millisecond))
		}
	}
	imgs, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.images.length`))
	require.NoError(t, err)
	require.Zero(t, imgs, "a name made an element")
}
