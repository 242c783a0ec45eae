package browsertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/circuit/healthcheck"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/dashboard"
)

// tilePolicy reads the policy line of a command's tile ("" if none yet).
func tilePolicy(ctx context.Context, name string) (string, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[string](
		fmt.Sprintf(`(() => { const t = %s; return t ? t.querySelector('.policy').textContent : ''; })()`, tileJS(name))))
}

// checkLine is the policy text of an open breaker whose every health check
// failed.
var checkLine = regexp.MustCompile(`^health check: [0-9]+ checks?, [0-9]+ failed; last failed: connection refused$`)

// The page shows a warm-up a deploy hook started (and its end), and the
// health checker's line of an open breaker.
func TestBrowserPolicies(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped in -short mode")
	}
	ctx := startChromium(t)
	reg := command.NewRegistry(command.RegistryConfig{Logger: slog.New(slog.DiscardHandler)})
	breaker := circuit.Config{MinRequests: 5, OpenDuration: time.Hour}
	search, err := reg.NewGroup("search", command.GroupConfig{Strategy: command.Semaphore, CommandBreaker: breaker})
	require.NoError(t, err)
	ledger, err := reg.NewGroup("ledger", command.GroupConfig{Strategy: command.Semaphore, CommandBreaker: breaker,
		Commands: map[string]command.CommandConfig{"Post": {}}}) // declared: its breaker exists now
	require.NoError(t, err)
	post, _ := ledger.CommandBreaker("Post")
	checker, err := healthcheck.Start(post, healthcheck.Config{Interval: 20 * time.Millisecond,
		Check: func(context.Context) error { return errors.New("connection refused") }})
	require.NoError(t, err)
	defer checker.Stop()

	var failing atomic.Bool
	failing.Store(true)
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, gc := range []struct {
		g    *command.Group
		call namedCall
	}{{search, namedCall{name: "Query"}}, {ledger, namedCall{name: "Post", fail: &failing}}} {
		wg.Go(func() {
			for runCtx.Err() == nil {
				_, _ = command.Execute(runCtx, gc.g, gc.call)
				time.Sleep(5 * time.Millisecond)
			}
		})
	}

	h, err := dashboard.New(reg, dashboard.Config{})
	require.NoError(t, err)
	sw := &switchable{h: h}
	ts := httptest.NewServer(sw)
	defer func() {
		sw.down.Store(true)
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, h.Close(cctx))
		ts.Close()
		stop()
		wg.Wait()
		assert.NoError(t, reg.Close(cctx))
	}()

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/?delay=100")))
	waitFor(t, 10*time.Second, "Query tile", "Closed", func() (string, error) { return tileState(ctx, "Query") })

	require.NoError(t, search.WarmUp(time.Hour)) // the deploy hook
	waitFor(t, 10*time.Second, "Query warming up", "true", func() (string, error) {
		p, err := tilePolicy(ctx, "Query")
		return fmt.Sprint(strings.HasPrefix(p, "warming up · ") && strings.HasSuffix(p, " left")), err
	})
	attr, err := chromedp.Run(ctx, chromedp.Evaluate[string](tileJS("Query")+`.dataset.warming`))
	require.NoError(t, err)
	assert.Equal(t, "true", attr)

	require.NoError(t, search.WarmUp(0))
	waitFor(t, 10*time.Second, "Query warm-up over", "", func() (string, error) { return tilePolicy(ctx, "Query") })

	waitFor(t, 10*time.Second, "Post open", "Open", func() (string, error) { return tileState(ctx, "Post") })
	waitFor(t, 10*time.Second, "Post health check", "true", func() (string, error) {
		p, err := tilePolicy(ctx, "Post")
		return fmt.Sprint(checkLine.MatchString(p)), err
	})
}
