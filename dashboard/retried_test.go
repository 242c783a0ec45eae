package dashboard

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/metrics"
)

// idempotentFail is a command that fails every attempt and may be retried.
type idempotentFail struct{}

func (idempotentFail) Name() string                        { return "Fetch" }
func (idempotentFail) Idempotent() bool                    { return true }
func (idempotentFail) Run(context.Context) (string, error) { return "", errors.New("down") }

// TestStreamRetriedOnlyInTheNativeEvent: a group that retries shows its
// RETRIED attempts in the native event (rollingCountRetried), and the
// Hystrix event, which has no key for them, counts attempts by their own
// outcome only: 4 calls of 3 attempts are 12 failures there (20 if RETRIED
// were counted as failures), 8 retried in the native event, and the
// Hystrix counts other than the failures and the callers' errors and
// missing fallbacks stay 0.
func TestStreamRetriedOnlyInTheNativeEvent(t *testing.T) {
	clock := &metrics.ManualClock{}
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	defer reg.Close(context.Background())
	g, err := reg.NewGroup("api", command.GroupConfig{Strategy: command.Semaphore,
		Breaker: circuit.Config{Mode: circuit.ObserveOnly}, CommandBreaker: circuit.Config{Mode: circuit.ObserveOnly},
		Retry: retry.Config{MaxAttempts: 3, NoBudget: true, Sleep: func(context.Context, time.Duration) error { return nil }}})
	require.NoError(t, err)
	for range 4 {
		_, info, err := command.ExecuteInfo(context.Background(), g, idempotentFail{})
		require.Error(t, err)
		require.Equal(t, 3, info.Attempts)
	}

	_, ts := newTestStream(t, reg, Config{})
	c := openStream(t, newTestClient(), ts.URL)
	defer c.Close()
	f, err := c.sse.frame()
	require.NoError(t, err)

	native := f.find(TypeBulwarkCommand, "Fetch", "api")
	require.NotNil(t, native)
	assert.EqualValues(t, 8, num(native["rollingCountRetried"]), "two retried attempts per call")

	h := f.find(TypeHystrixCommand, "Fetch", "api")
	require.NotNil(t, h)
	assert.EqualValues(t, 12, num(h["rollingCountFailure"]), "every attempt by its own outcome")
	assert.EqualValues(t, 4, num(h["rollingCountExceptionsThrown"]), "once per call")
	for k, v := range h {
		if strings.HasPrefix(k, "rollingCount") && k != "rollingCountFailure" && k != "rollingCountExceptionsThrown" &&
			k != "rollingCountFallbackMissing" {
			assert.Zero(t, num(v), "%s: RETRIED counts in no Hystrix key", k)
		}
	}
}
