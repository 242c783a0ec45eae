package command

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/internal/logtest"
	"github.com/bulwark-go/bulwark/metrics"
)

// changed returns g's config with change applied.
func changed(g *Group, change func(*GroupConfig)) GroupConfig {
	c := g.Config()
	change(&c)
	return c
}

func TestReconfigureAppliesToNextCall(t *testing.T) {
	g, clock := newTestGroup(t, GroupConfig{Strategy: Semaphore, MaxConcurrent: 1, Timeout: time.Second,
		CommandBreaker: circuit.Config{MinRequests: 10}})
	deadline := func() time.Duration {
		var left time.Duration
		_, err := Execute(context.Background(), g, op[int]{"get", func(ctx context.Context) (int, error) {
			d, _ := ctx.Deadline()
			left = time.Until(d)
			return 0, nil
		}})
		require.NoError(t, err)
		return left
	}
	require.Greater(t, deadline(), 500*time.Millisecond)
	clock.Advance(time.Minute)
	require.NoError(t, g.Reconfigure(changed(g, func(c *GroupConfig) {
		c.Timeout = 50 * time.Millisecond
		c.MaxConcurrent = 3
		c.FallbackLimit = 4
		c.CommandBreaker.MinRequests = 2
	})))
	require.LessOrEqual(t, deadline(), 50*time.Millisecond)
	s := g.Snapshot()
	assert.Equal(t, uint64(1), s.ConfigGeneration)
	assert.Zero(t, s.ConfigAge)
	assert.Equal(t, 3, s.Bulkhead.Capacity)
	assert.Equal(t, 4, g.fallback.Stats().Capacity)
	assert.Equal(t, 50*time.Millisecond, s.Commands[0].Timeout)
	assert.Equal(t, 2, s.Commands[0].Breaker.Config.MinRequests, "the command breaker took the new template")
	assert.Equal(t, 50*time.Millisecond, g.Config().Timeout)
	clock.Advance(time.Second)
	assert.Equal(t, time.Second, g.Snapshot().ConfigAge)
}

func TestReconfigureRejectedChangesNothing(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{MaxConcurrent: 2, QueueSize: 1, Timeout: time.Second})
	_, err := Execute(context.Background(), g, op[int]{"get", succeed(1)})
	require.NoError(t, err)
	before := g.Config()
	for field, change := range map[string]func(*GroupConfig){
		"MaxConcurrent":   func(c *GroupConfig) { c.MaxConcurrent, c.Timeout = -1, time.Millisecond },
		"Strategy":        func(c *GroupConfig) { c.Strategy, c.QueueSize = Semaphore, 0 },
		"Window":          func(c *GroupConfig) { c.Window.Buckets = 5 },
		"Mode":            func(c *GroupConfig) { c.CommandBreaker.Mode = circuit.ForcedOpen },
		"FailureRatio":    func(c *GroupConfig) { c.Breaker.FailureRatio = 3 },
		"Commands[\"x\"]": func(c *GroupConfig) { c.Commands = map[string]CommandConfig{"x": {Timeout: -2}} },
		"Breaker.Mode": func(c *GroupConfig) {
			c.Commands = map[string]CommandConfig{"x": {Breaker: &circuit.Config{Mode: circuit.ForcedClosed}}}
		},
		"Alerts": func(c *GroupConfig) { c.Alerts = &recordingAlerter{} },
		"WarmUp": func(c *GroupConfig) { c.CommandBreaker.WarmUp = time.Minute },
	} {
		err := g.Reconfigure(changed(g, change))
		require.ErrorIs(t, err, ErrInvalidConfig, field)
		require.ErrorContains(t, err, field)
		require.Equal(t, err, g.CheckReconfigure(changed(g, change)), field)
	}
	s := g.Snapshot()
	assert.Zero(t, s.ConfigGeneration)
	assert.Equal(t, 2, s.Bulkhead.Capacity)
	assert.Equal(t, 1, s.Bulkhead.QueueCapacity)
	assert.Equal(t, before.Timeout, g.Config().Timeout)
	assert.Equal(t, []string{"get"}, commandNames(s))
	assert.Equal(t, circuit.Normal, s.Commands[0].Breaker.Mode)

	require.NoError(t, g.Close(context.Background()))
	require.ErrorIs(t, g.Reconfigure(before), ErrClosed)
}

// TestPerCommandSettings: one command's own breaker, slow-call threshold
// and timeout do not touch its siblings, at creation and when changed live.
func TestPerCommandSettings(t *testing.T) {
	g, clock := newTestGroup(t, GroupConfig{Strategy: Semaphore, MaxConcurrent: 4,
		CommandBreaker: circuit.Config{MinRequests: 100},
		Commands: map[string]CommandConfig{
			"fragile": {Breaker: &circuit.Config{MinRequests: 1}},
		}})
	boom := errors.New("boom")
	for _, name := range []string{"fragile", "sturdy"} {
		_, err := Execute(context.Background(), g, op[int]{name, fail[int](boom)})
		require.ErrorIs(t, err, boom)
	}
	fragile, _ := g.CommandBreaker("fragile")
	sturdy, _ := g.CommandBreaker("sturdy")
	assert.Equal(t, circuit.Open, fragile.State(), "its own breaker: MinRequests 1")
	assert.Equal(t, circuit.Closed, sturdy.State(), "the template: MinRequests 100")

	slowEvents := func(name string) bool {
		_, info, err := ExecuteInfo(context.Background(), g, op[int]{name, func(context.Context) (int, error) {
			clock.Advance(time.Millisecond)
			return 1, nil
		}})
		require.NoError(t, err)
		return info.Events.Has(metrics.Slow)
	}
	assert.False(t, slowEvents("sturdy"))
	require.NoError(t, g.ReconfigureCommand("sturdy", CommandConfig{Timeout: 7 * time.Second,
		Breaker: &circuit.Config{MinRequests: 2, FailureRatio: 0.2, SlowCallDuration: time.Nanosecond, SlowCallRatio: 1}}))
	assert.True(t, slowEvents("sturdy"), "the new threshold applies to the next call")
	assert.Equal(t, 2, sturdy.Config().MinRequests)
	assert.Equal(t, 7*time.Second, g.Snapshot().Commands[1].Timeout)
	assert.Equal(t, 1, fragile.Config().MinRequests, "the sibling keeps its own breaker")
	assert.Contains(t, g.Config().Commands, "fragile", "ReconfigureCommand keeps the other commands' settings")

	// A command no longer declared reverts to the group's settings.
	require.NoError(t, g.Reconfigure(changed(g, func(c *GroupConfig) { c.Commands = nil })))
	assert.Equal(t, 100, fragile.Config().MinRequests)
	assert.Equal(t, defaultTimeout, g.Snapshot().Commands[0].Timeout)
}

func TestReconfigureDeclaresCommands(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{MaxCommands: 1})
	_, err := Execute(context.Background(), g, op[int]{"a", succeed(1)})
	require.NoError(t, err)
	_, info, err := ExecuteInfo(context.Background(), g, op[int]{"b", succeed(1)})
	require.NoError(t, err)
	require.Equal(t, overflowCommand, info.Command)
	require.NoError(t, g.Reconfigure(changed(g, func(c *GroupConfig) {
		c.MaxCommands = 4
		c.Commands = map[string]CommandConfig{"declared": {Timeout: time.Minute}}
	})))
	assert.Equal(t, []string{overflowCommand, "a", "declared"}, commandNames(g.Snapshot()))
	_, info, err = ExecuteInfo(context.Background(), g, op[int]{"c", succeed(1)})
	require.NoError(t, err)
	assert.Equal(t, "c", info.Command, "room under the new MaxCommands: new names get their own command again")
}

func TestReconfigureLogsChanges(t *testing.T) {
	var buf logtest.Buffer
	reg := NewRegistry(RegistryConfig{Clock: new(metrics.ManualClock), Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("db", GroupConfig{})
	require.NoError(t, err)
	require.NoError(t, g.Reconfigure(changed(g, func(c *GroupConfig) { c.MaxConcurrent, c.Breaker.FailureRatio = 20, 0.25 })))
	assert.Contains(t, buf.String(), `msg="bulwark: group reconfigured" group=db generation=1 MaxConcurrent="10 -> 20" Breaker.FailureRatio="0 -> 0.25"`)
	assert.Contains(t, buf.String(), `msg="circuit breaker reconfigured" breaker=db generation=1 FailureRatio="0.5 -> 0.25"`)
}

// TestConservationUnderReconfigure is the chaos test with the bulkheads,
// fallback limits, timeouts and breaker thresholds reconfigured
// continuously: every count still agrees exactly with what the callers saw.
func TestConservationUnderReconfigure(t *testing.T) {
	groups := chaosRegistry(t, circuit.Config{Mode: circuit.ForcedClosed}, nil)
	var stop atomic.Bool
	var wg sync.WaitGroup
	reconfigs := 0
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			for _, g := range groups {
				assert.NoError(t, g.Reconfigure(changed(g, func(c *GroupConfig) {
					c.MaxConcurrent = 1 + i%12
					if c.Strategy == Thread {
						c.QueueSize = i % 5
					}
					c.FallbackLimit = 1 + i%3
					c.Timeout = time.Duration(5+i%5) * time.Second
					c.CommandBreaker.FailureRatio = []float64{0.2, 0.5}[i%2]
				})))
			}
			reconfigs++
			time.Sleep(100 * time.Microsecond)
		}
	})
	const calls = chaosCalls / 8
	res := runChaos(t, groups, calls)
	stop.Store(true)
	wg.Wait()
	require.False(t, t.Failed())
	waitIdle(t, groups)
	checkDiscards(t, res)
	t.Logf("%d reconfigurations of each group", reconfigs)
	require.Greater(t, reconfigs, 10)
	var total int64
	for _, g := range groups {
		now := g.clock.Now()
		var groupSeen metrics.Counts
		for name, c := range g.commands.Load().byName {
			seen := res.tallies[g.name+"/"+name]
			require.NotNil(t, seen, name)
			assert.Equal(t, seen.events, c.metrics.Counts(now), "%s/%s: window == what callers saw", g.name, name)
			assert.Equal(t, seen.calls, seen.events.Attempts(), "%s/%s: one primary outcome per call", g.name, name)
			assert.Zero(t, c.hot.inFlight.Load())
			assert.Zero(t, c.hot.detached.Load())
			addCounts(&groupSeen, seen.events)
			total += seen.calls
		}
		assert.Equal(t, groupSeen[g.rejected], g.Snapshot().Bulkhead.Rejected, "%s: bulkhead rejections", g.name)
		assert.Equal(t, groupSeen[metrics.FallbackRejection], g.fallback.Stats().Rejected, "%s: fallback rejections", g.name)
		assert.Equal(t, uint64(reconfigs), g.Snapshot().ConfigGeneration)
	}
	assert.Equal(t, int64(calls/chaosGoroutines*chaosGoroutines), total)
}

// TestResizeNeverExceedsBound resizes the bulkhead up and down under load,
// in both strategies: once the calls above a new limit have finished, no
// more than that limit ever run at once.
func TestResizeNeverExceedsBound(t *testing.T) {
	for _, strategy := range []Strategy{Thread, Semaphore} {
		t.Run(strategy.String(), func(t *testing.T) {
			g, _ := newTestGroup(t, GroupConfig{Strategy: strategy, MaxConcurrent: 8, Timeout: NoTimeout})
			var running, limit, over atomic.Int64
			limit.Store(1 << 30) // no bound checked until the first resize has settled
			work := op[int]{"work", func(context.Context) (int, error) {
				if n := running.Add(1); n > limit.Load() {
					over.Add(1)
				}
				time.Sleep(50 * time.Microsecond)
				running.Add(-1)
				return 1, nil
			}}
			var stop atomic.Bool
			var wg sync.WaitGroup
			var admitted atomic.Int64
			for range 16 {
				wg.Go(func() {
					for !stop.Load() {
						if _, err := Execute(context.Background(), g, work); err == nil {
							admitted.Add(1)
						}
					}
				})
			}
			for i := range 60 {
				n := []int{8, 1, 5, 2, 12, 3}[i%6]
				limit.Store(1 << 30) // the old limit may be above n: no bound while it drains
				require.NoError(t, g.Reconfigure(changed(g, func(c *GroupConfig) { c.MaxConcurrent = n })))
				// The excess: calls holding a worker or permit taken before the resize.
				require.Eventually(t, func() bool { return g.Snapshot().Bulkhead.Active <= n }, 10*time.Second, 10*time.Microsecond)
				limit.Store(int64(n))
				time.Sleep(2 * time.Millisecond)
			}
			stop.Store(true)
			wg.Wait()
			assert.Zero(t, over.Load(), "calls ran above the bulkhead's limit")
			assert.Positive(t, admitted.Load())
		})
	}
}
