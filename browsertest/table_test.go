package browsertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/dashboard"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/ratelimit"
)

// runCalls calls command name of g ok times with success, then bad times
// with failure.
func runCalls(t *testing.T, g *command.Group, name string, ok, bad int) {
	t.Helper()
	for i := range ok + bad {
		fail := i >= ok
		_, _ = command.Execute(context.Background(), g, command.Func(name, func(context.Context) (int, error) {
			if fail {
				return 0, errors.New("down")
			}
			return 1, nil
		}, nil))
	}
}

// manualRegistry is a registry on a clock that never moves: its windows
// keep every call of the test.
func manualRegistry(t *testing.T) (*command.Registry, *metrics.ManualClock) {
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { assert.NoError(t, reg.Close(context.Background())) })
	return reg, clock
}

// shownCounters lists the counters a command's tile shows.
func shownCounters(ctx context.Context, name string) func() (string, error) {
	return evalString(ctx, fmt.Sprintf(`(() => { const t = %s; return t ? Array.from(t.querySelectorAll('.counter'))
		.filter(c => !c.hidden).map(c => c.dataset.k).join(',') : ''; })()`, tileJS(name)))
}

// TestBrowserNeverCalledCommandShowsNoData: a declared command no call
// has reached shows "–" for its error % and every latency, not "0 ms"; a
// command that ran shows its figures.
func TestBrowserNeverCalledCommandShowsNoData(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped in -short mode")
	}
	ctx := startChromium(t)
	reg, _ := manualRegistry(t)
	g, err := reg.NewGroup("api", command.GroupConfig{Strategy: command.Semaphore, Commands: map[string]command.CommandConfig{"Idle": {}}})
	require.NoError(t, err)
	runCalls(t, g, "Busy", 3, 0)
	url := serveRegistry(t, reg, dashboard.Config{})
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url+"/?delay=100")))

	latencies := func(name string) func() (string, error) {
		return evalString(ctx, fmt.Sprintf(`(() => { const t = %s; return t ? Array.from(t.querySelectorAll('.pct .v'))
			.map(v => v.textContent).join(' | ') : ''; })()`, tileJS(name)))
	}
	waitFor(t, 10*time.Second, "Idle's latencies", "– | – | – | – | – | –", latencies("Idle"))
	waitFor(t, 5*time.Second, "Idle's error %", "–", func() (string, error) { return tileText(ctx, "Idle", ".errpct") })
	waitFor(t, 5*time.Second, "Busy's latencies", "0 ms | 0 ms | 0 ms | 0 ms | 0 ms | 0 ms", latencies("Busy"))
	waitFor(t, 5*time.Second, "Busy's error %", "0%", func() (string, error) { return tileText(ctx, "Busy", ".errpct") })

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url+"/?delay=100&view=table")))
	cells := evalString(ctx, `(() => { const r = Array.from(document.querySelectorAll('[data-row]')).find(r => r.dataset.row === 'Idle');
		return r ? ['error', 'p50', 'latency', 'max'].map(k => r.querySelector('.col-' + k).textContent).join(' | ') : ''; })()`)
	waitFor(t, 10*time.Second, "Idle's row", "– | – | – | –", cells)
}

// TestBrowserHidesCountersOfFeaturesOff: a command without a timeout, a
// fallback, a rate limit or retries, behind observe-only breakers, shows
// only the counters that can count (success, failure, rejected) and no
// timeout; one that uses them shows theirs.
func TestBrowserHidesCountersOfFeaturesOff(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped in -short mode")
	}
	ctx := startChromium(t)
	reg, clock := manualRegistry(t)
	observe := circuit.Config{Mode: circuit.ObserveOnly}
	plain, err := reg.NewGroup("plain", command.GroupConfig{Strategy: command.Semaphore, Timeout: command.NoTimeout,
		Breaker: observe, CommandBreaker: observe})
	require.NoError(t, err)
	runCalls(t, plain, "Plain", 5, 2)
	bucket, err := ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 1, Burst: 2, Clock: clock})
	require.NoError(t, err)
	full, err := reg.NewGroup("full", command.GroupConfig{Strategy: command.Semaphore, RateLimit: bucket})
	require.NoError(t, err)
	withFallback := command.Func("Full", func(context.Context) (int, error) { return 0, errors.New("down") },
		func(context.Context, error) (int, error) { return -1, nil })
	for range 4 {
		_, _ = command.Execute(context.Background(), full, withFallback)
	}
	url := serveRegistry(t, reg, dashboard.Config{})
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url+"/?delay=100")))

	waitFor(t, 10*time.Second, "Plain's counters", "success,failure,rejected", shownCounters(ctx, "Plain"))
	waitFor(t, 5*time.Second, "Plain's timeout", "", func() (string, error) { return tileText(ctx, "Plain", ".timeout") })
	waitFor(t, 5*time.Second, "Full's counters", "success,failure,timeout,rejected,short-circuited,fallback,rate-limited",
		shownCounters(ctx, "Full"))
	waitFor(t, 5*time.Second, "Full's timeout", "timeout 1,000 ms", func() (string, error) { return tileText(ctx, "Full", ".timeout") })

	// The table shows a column where some command counts.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url+"/?delay=100&view=table")))
	waitFor(t, 10*time.Second, "the table's counter columns", "Success,Failure,Timeout,Rejected,Short-circuited,Fallback,Rate limited",
		evalString(ctx, `Array.from(document.querySelectorAll('.th.col-counter')).filter(c => !c.hidden).map(c => c.textContent).join(',')`))
}

// TestBrowserCommandTable: the table has a row per command, sorts by the
// column clicked (again: the other way), filters by state and by name,
// and groups by group in sections that fold away.
func TestBrowserCommandTable(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped in -short mode")
	}
	ctx := startChromium(t)
	reg, _ := manualRegistry(t)
	breaker := circuit.Config{MinRequests: 5, OpenDuration: time.Hour}
	users, err := reg.NewGroup("users", command.GroupConfig{MaxConcurrent: 4, CommandBreaker: breaker})
	require.NoError(t, err)
	orders, err := reg.NewGroup("orders", command.GroupConfig{Strategy: command.Semaphore, CommandBreaker: breaker})
	require.NoError(t, err)
	runCalls(t, users, "GetUser", 20, 1)
	runCalls(t, users, "ListUsers", 10, 3)
	runCalls(t, orders, "PlaceOrder", 0, 6) // trips its breaker
	runCalls(t, orders, "GetOrder", 8, 2)
	url := serveRegistry(t, reg, dashboard.Config{})
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1400, 1000), chromedp.Navigate(url+"/?delay=100&view=table")))

	rows := evalString(ctx, `Array.from(document.querySelectorAll('[data-row]')).map(r => r.dataset.row).join(',')`)
	click := func(js string) {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { `+js+`; return true; })()`))
		require.NoError(t, err)
	}
	clickColumn := func(col string) {
		t.Helper()
		click(fmt.Sprintf(`document.querySelector('.th[data-col=%q] button').click()`, col))
	}
	// Error % first: the open breaker, then 23 % (3 of 13), 20 %, 5 %.
	waitFor(t, 10*time.Second, "rows by error %", "PlaceOrder,ListUsers,GetOrder,GetUser", rows)
	tiles, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#commands:not([hidden]) [data-command]').length`))
	require.NoError(t, err)
	assert.Zero(t, tiles, "the table replaces the tiles")

	clickColumn("c:success")
	waitFor(t, 5*time.Second, "rows by successes", "GetUser,ListUsers,GetOrder,PlaceOrder", rows)
	waitFor(t, time.Second, "sorted column", "descending",
		evalString(ctx, `document.querySelector('.th[data-col="c:success"]').getAttribute('aria-sort')`))
	clickColumn("c:success")
	waitFor(t, 5*time.Second, "rows by successes, fewest first", "PlaceOrder,GetOrder,ListUsers,GetUser", rows)
	clickColumn("name")
	waitFor(t, 5*time.Second, "rows by name", "GetOrder,GetUser,ListUsers,PlaceOrder", rows)
	waitFor(t, time.Second, "the sort box", "Name", evalString(ctx, `document.getElementById('sort').selectedOptions[0].textContent`))

	click(`const s = document.getElementById('state-filter'); s.value = 'open'; s.dispatchEvent(new Event('change'))`)
	waitFor(t, 5*time.Second, "open only", "PlaceOrder", rows)
	waitFor(t, time.Second, "count", "1 of 4", evalString(ctx, `document.getElementById('cmd-count').textContent`))
	click(`const s = document.getElementById('state-filter'); s.value = 'all'; s.dispatchEvent(new Event('change'))`)
	click(`const f = document.getElementById('filter'); f.value = 'user'; f.dispatchEvent(new Event('input'))`)
	waitFor(t, 5*time.Second, "filtered by name (and group)", "GetUser,ListUsers", rows)
	click(`const f = document.getElementById('filter'); f.value = ''; f.dispatchEvent(new Event('input'))`)

	// By group: a section per group, the group's column gone.
	click(`document.getElementById('grouped').click()`)
	sections := evalString(ctx, `Array.from(document.querySelectorAll('#tbody [data-section]')).map(s => s.dataset.section + ': ' +
		s.querySelector('.gsum').textContent + ' [' + Array.from(s.querySelectorAll('[data-row]')).map(r => r.dataset.row).join(',') + ']').join(' / ')`)
	waitFor(t, 5*time.Second, "sections", "orders: 2 of 2 commands · 1 open · SEMAPHORE 0/10 active [GetOrder,PlaceOrder] / "+
		"users: 2 of 2 commands · THREAD 0/4 active [GetUser,ListUsers]", sections)
	waitFor(t, time.Second, "no group column", "true", evalString(ctx, `String(document.querySelector('.th.col-group').hidden)`))
	click(`document.querySelector('#tbody [data-section="orders"] .fold').click()`)
	waitFor(t, 5*time.Second, "orders folded", "orders: 2 of 2 commands · 1 open · SEMAPHORE 0/10 active [] / "+
		"users: 2 of 2 commands · THREAD 0/4 active [GetUser,ListUsers]", sections)
	waitFor(t, time.Second, "fold state", "false",
		evalString(ctx, `document.querySelector('#tbody [data-section="orders"] .fold').getAttribute('aria-expanded')`))

	// The tiles group the same way, and keep the fold.
	click(`document.querySelector('[data-view="tiles"]').click()`)
	waitFor(t, 5*time.Second, "tile sections", "orders:  / users: GetUser,ListUsers", evalString(ctx,
		`Array.from(document.querySelectorAll('#commands [data-section]')).map(s => s.dataset.section + ': ' +
		Array.from(s.querySelectorAll('[data-command]')).map(r => r.dataset.command).join(',')).join(' / ')`))
}
