package browsertest

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/dashboard"
	"github.com/bulwark-go/bulwark/metrics"
)

// flaky is an idempotent command whose Run fails every attempt.
type flaky struct{}

func (flaky) Name() string                     { return "Fetch" }
func (flaky) Idempotent() bool                 { return true }
func (flaky) Run(context.Context) (int, error) { return 0, errors.New("down") }

// TestBrowserRetriedCounter: a command whose failed attempts are retried
// shows them in the tile's "Retried" counter, next to "Rate limited", apart
// from its failures (every attempt): 5 calls of 3 attempts are 10 retried
// and 15 failures. The registry runs on a manual clock that never moves, so
// the window keeps every attempt.
func TestBrowserRetriedCounter(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped in -short mode")
	}
	ctx := startChromium(t)
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { assert.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("api", command.GroupConfig{Strategy: command.Semaphore,
		Breaker: circuit.Config{Mode: circuit.ObserveOnly}, CommandBreaker: circuit.Config{Mode: circuit.ObserveOnly},
		Retry: retry.Config{MaxAttempts: 3, NoBudget: true, Sleep: func(context.Context, time.Duration) error { return nil }}})
	require.NoError(t, err)
	const calls, attempts = 5, 3
	for range calls {
		_, info, err := command.ExecuteInfo(context.Background(), g, flaky{})
		require.Error(t, err)
		require.Equal(t, attempts, info.Attempts)
	}

	url := serveRegistry(t, reg, dashboard.Config{})
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url+"/?delay=100")))

	counter := func(k string) func() (string, error) { return tileCounter(ctx, "Fetch", k) }
	waitFor(t, 10*time.Second, "Retried counter", strconv.Itoa(calls*(attempts-1)), counter("retried"))
	waitFor(t, 10*time.Second, "Failure counter", strconv.Itoa(calls*attempts), counter("failure"))
	waitFor(t, 10*time.Second, "Rate limited counter", "0", counter("rate-limited"))
	label, err := tileText(ctx, "Fetch", ".counter.c-retried .k")
	require.NoError(t, err)
	assert.Equal(t, "Retried", label)
	next, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`(() => { const t = `+tileJS("Fetch")+`; const c = t && t.querySelector('.counter.c-rate-limited');
		  return c && c.nextElementSibling ? c.nextElementSibling.className : ''; })()`))
	require.NoError(t, err)
	assert.Contains(t, next, "c-retried", "Retried sits next to Rate limited")
}
