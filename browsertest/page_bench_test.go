package browsertest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// BenchmarkBrowserPage measures what the page costs the browser per frame
// of the stream with 300 and 1,000 commands, in the tiles and in the table
// (a 1400×1000 window): the main thread's time in tasks, and in style and
// layout, per frame (Chrome's Performance.getMetrics; its script time
// leaves out what runs from promises, such as the page's stream reader). Frames
// alternate between two versions of every command's figures, so that each
// frame changes every command: the page's worst case. A frame comes every
// 500 ms, the stream's default interval, so each iteration takes that long:
//
//	go -C browsertest test -run '^$' -bench BrowserPage -benchtime 20x .
func BenchmarkBrowserPage(b *testing.B) {
	for _, n := range []int{300, 1000} {
		for _, view := range []string{"tiles", "table"} {
			b.Run(fmt.Sprintf("commands=%d/view=%s", n, view), func(b *testing.B) { benchPage(b, n, view) })
		}
	}
}

func benchPage(b *testing.B, n int, view string) {
	tp := realTemplates(b)
	cmds, groups := largeService(n)
	now := time.Now()
	var frames [2][]byte
	for v := range frames {
		var evs []map[string]any
		for _, c := range cmds {
			c.success += int64(v) * 3
			c.latency[0] += int64(v)
			c.inFlight += int64(v)
			evs = append(evs, tp.commandEvents(b, now, c)...)
		}
		for _, g := range groups {
			g.active += v
			evs = append(evs, tp.groupEvents(b, now, g)...)
		}
		frames[v] = encodeEvents(evs)
	}
	var sent atomic.Int64
	s := serveSynth(b, 500*time.Millisecond, nil, func(time.Time) []byte {
		return frames[sent.Add(1)%2]
	})
	ctx := startChromium(b)
	require.NoError(b, chromedp.Do(ctx, chromedp.EmulateViewport(1400, 1000), chromedp.Navigate(s.URL+"?view="+view)))
	want := fmt.Sprintf("%d of %d", n, n)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('cmd-count').textContent`))
		require.NoError(b, err)
		if got == want {
			break
		}
		require.True(b, time.Now().Before(deadline), "the page shows %q, not %q", got, want)
		time.Sleep(100 * time.Millisecond)
	}
	_, err := chromedp.Call(ctx, performance.Enable, performance.EnableParams{})
	require.NoError(b, err)
	metrics := func() map[string]float64 {
		r, err := chromedp.Call(ctx, performance.GetMetrics, cdp.Empty{})
		require.NoError(b, err)
		m := map[string]float64{}
		for _, x := range r.Metrics {
			m[x.Name] = x.Value
		}
		return m
	}
	before := metrics()
	b.ResetTimer()
	for range b.N {
		// One more frame sent, and time for the page to take it.
		for last := sent.Load(); sent.Load() == last; {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.StopTimer()
	after := metrics()
	per := func(k string) float64 { return (after[k] - before[k]) * 1000 / float64(b.N) }
	b.ReportMetric(per("TaskDuration"), "task-ms/frame")
	b.ReportMetric(per("LayoutDuration")+per("RecalcStyleDuration"), "layout-ms/frame")
	b.ReportMetric(0, "ns/op") // the wall time is the stream's interval, not the page's cost
}
