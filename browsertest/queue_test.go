package browsertest

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/dashboard"
)

// The page shows a tile per write queue from the BulwarkQueue events a
// stream's Config.Extra adds (durable.Replayer.StreamEvent), names as text,
// and hides the panel while there is none.
func TestBrowserWriteQueues(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped in -short mode")
	}
	ctx := startChromium(t)
	reg := command.NewRegistry(command.RegistryConfig{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	var backlog atomic.Int64
	var on atomic.Bool
	extra := func() []any {
		if !on.Load() {
			return nil
		}
		return []any{map[string]any{"type": "BulwarkQueue", "name": xssName, "backlog": backlog.Load(),
			"oldestAgeMs": 65000, "replayed": 12, "deadLettered": 1, "deadLetters": 1}}
	}
	url := serveRegistry(t, reg, dashboard.Config{Extra: extra})
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url+"/?delay=100")))

	hidden := func() (string, error) {
		return chromedp.Run(ctx, chromedp.Evaluate[string](`String(document.getElementById('queue-panel').hidden)`))
	}
	waitFor(t, 10*time.Second, "connected", "live", func() (string, error) {
		v, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.ID("conn"), "data-conn"))
		return v.Value, err
	})
	got, err := hidden()
	require.NoError(t, err)
	assert.Equal(t, "true", got, "no queue, no panel")

	backlog.Store(7)
	on.Store(true)
	field := func(k string) func() (string, error) {
		return func() (string, error) {
			return chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(() => {
				const t = document.querySelector('[data-queue]');
				return t ? t.querySelector('[data-k=%q] .v').textContent : '';
			})()`, k)))
		}
	}
	waitFor(t, 10*time.Second, "backlog", "7", field("backlog"))
	waitFor(t, 10*time.Second, "panel shown", "false", hidden)
	for k, want := range map[string]string{"oldestAgeMs": "1m 05s", "replayed": "12", "deadLettered": "1", "deadLetters": "1"} {
		waitFor(t, 5*time.Second, k, want, field(k))
	}
	backlog.Store(0)
	waitFor(t, 10*time.Second, "drained", "0", field("backlog"))
	name, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`(() => {
		const t = document.querySelector('[data-queue]');
		return {name: t.dataset.queue, imgs: document.querySelectorAll('#queues img').length};
	})()`))
	require.NoError(t, err)
	assert.Equal(t, xssName, name["name"], "the name is text")
	assert.EqualValues(t, 0, name["imgs"])
}
