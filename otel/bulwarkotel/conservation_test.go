package bulwarkotel

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// chaos is a command whose Run does what kind says.
type chaos struct{ kind int }

func (c chaos) Name() string { return [...]string{"ok", "fail", "bad", "slow", "panic"}[c.kind] }
func (c chaos) Run(ctx context.Context) (int, error) {
	switch c.kind {
	case 1:
		return 0, errors.New("down")
	case 2:
		return 0, command.BadRequest(errors.New("bad input"))
	case 3:
		<-ctx.Done() // past the timeout
		return 0, ctx.Err()
	case 4:
		panic("boom")
	}
	time.Sleep(time.Millisecond) // long enough to fill a small bulkhead
	return 1, nil
}

// primary are the primary outcomes: exactly one per call (no retries
// here).
var primary = []metrics.Event{metrics.Success, metrics.Failure, metrics.Timeout, metrics.BadRequest, metrics.ShortCircuited,
	metrics.ThreadPoolRejected, metrics.SemaphoreRejected, metrics.Cancelled, metrics.QueueTimeout, metrics.RateLimited}

// TestConservation: concurrent calls of every kind, in a pool group and
// a semaphore group with small bulkheads and breakers that trip, some
// with their caller's context already cancelled: each call reaches the
// events counter with exactly one primary outcome (the one ExecuteInfo
// told its caller), the calls counter and the duration histogram once,
// and its caller's span with exactly one bulwark.call event.
func TestConservation(t *testing.T) {
	exp, tp := newTracing(t)
	r, mp := newReader(t)
	h, err := NewHook(Config{TracerProvider: tp, MeterProvider: mp})
	require.NoError(t, err)
	reg := command.NewRegistry(command.RegistryConfig{Logger: quiet, Hook: h})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	m, err := NewMetrics(reg, Config{MeterProvider: mp})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	trips := circuit.Config{MinRequests: 5, FailureRatio: 0.5, OpenDuration: 20 * time.Millisecond}
	pool, err := reg.NewGroup("pool", command.GroupConfig{MaxConcurrent: 3, QueueSize: 2, Timeout: 20 * time.Millisecond, CommandBreaker: trips})
	require.NoError(t, err)
	sem, err := reg.NewGroup("sem", command.GroupConfig{Strategy: command.Semaphore, MaxConcurrent: 2, Timeout: 20 * time.Millisecond, CommandBreaker: trips})
	require.NoError(t, err)

	const workers, per = 8, 60
	var mu sync.Mutex
	told := map[metrics.Event]int64{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			tracer := tp.Tracer("test")
			for i := range per {
				g := pool
				if (w+i)%2 == 1 {
					g = sem
				}
				ctx, span := tracer.Start(context.Background(), "caller")
				cctx, cancel := context.WithCancel(ctx)
				if i%17 == 0 {
					cancel()
				}
				_, info, _ := command.ExecuteInfo(cctx, g, chaos{kind: (w*per + i) % 5})
				cancel()
				span.End()
				mu.Lock()
				told[info.Event]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	const calls = workers * per

	c := collect(t, r)
	var sum, durations int64
	for _, e := range primary {
		n := c.sum(t, "bulwark.command.events", "bulwark.event", e.Label())
		assert.Equal(t, told[e], n, "%s: the counter holds what callers were told", e)
		sum += n
	}
	assert.EqualValues(t, calls, sum, "exactly one primary outcome per call")
	assert.EqualValues(t, calls, c.sum(t, "bulwark.command.calls"))
	for _, g := range []string{"pool", "sem"} {
		for _, cmd := range []string{"ok", "fail", "bad", "slow", "panic"} {
			for _, e := range primary {
				if p, ok := c.histogram(t, "bulwark.command.duration", "bulwark.group", g, "bulwark.command", cmd, "bulwark.event", e.Label()); ok {
					durations += int64(p.Count)
				}
			}
		}
	}
	assert.EqualValues(t, calls, durations, "one duration per call")
	assert.Greater(t, told[metrics.Success], int64(0))
	assert.Greater(t, told[metrics.Timeout], int64(0))
	assert.Greater(t, told[metrics.ShortCircuited]+told[metrics.ThreadPoolRejected]+told[metrics.SemaphoreRejected], int64(0),
		"some refusals: the test reaches bulwark's own outcomes")

	spans := exp.GetSpans()
	require.Len(t, spans, calls)
	for _, s := range spans {
		n := 0
		for _, ev := range s.Events {
			if ev.Name == "bulwark.call" {
				n++
			}
		}
		require.Equal(t, 1, n, "one bulwark.call event per caller's span")
	}
}
