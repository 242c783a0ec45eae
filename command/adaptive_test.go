package command

import (
	"context"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command/adaptive"
	"github.com/bulwark-go/bulwark/command/priority"
	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
)

func TestAdaptiveValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  GroupConfig
		want string
	}{
		{GroupConfig{Adaptive: adaptive.Config{Min: -1, Max: 10}}, "Adaptive.Min -1 must be at least 1"},
		{GroupConfig{Adaptive: adaptive.Config{Min: 5}}, "Adaptive.Max 0 must be between Adaptive.Min 5"},
		{GroupConfig{Adaptive: adaptive.Config{Min: 5, Max: 4}}, "Adaptive.Max 4 must be between Adaptive.Min 5"},
		{GroupConfig{Adaptive: adaptive.Config{Max: 10, Initial: 11}}, "Adaptive.Initial 11 must be between Adaptive.Min 1 and Adaptive.Max 10"},
		{GroupConfig{Adaptive: adaptive.Config{Max: 10, Tolerance: 0.9}}, "Adaptive.Tolerance 0.9 must be between 1 and 10"},
		{GroupConfig{Adaptive: adaptive.Config{Max: 10, Tolerance: math.NaN()}}, "Adaptive.Tolerance NaN"},
		{GroupConfig{Adaptive: adaptive.Config{Max: 10, Smoothing: 1.5}}, "Adaptive.Smoothing 1.5 must be above 0 and at most 1"},
		{GroupConfig{Adaptive: adaptive.Config{Max: 10, Smoothing: -0.1}}, "Adaptive.Smoothing -0.1"},
		{GroupConfig{Adaptive: adaptive.Config{Max: 10, Window: -time.Second}}, "Adaptive.Window -1s must not be negative"},
		{GroupConfig{MaxConcurrent: 20, Adaptive: adaptive.Config{Max: 10}}, "MaxConcurrent 20 differs from Adaptive.Max 10"},
	} {
		err := c.cfg.Validate()
		require.ErrorIs(t, err, ErrInvalidConfig, c.want)
		assert.ErrorContains(t, err, c.want)
	}
	assert.NoError(t, GroupConfig{Adaptive: adaptive.Config{Max: 10}}.Validate())
	assert.NoError(t, GroupConfig{MaxConcurrent: 10, Adaptive: adaptive.Config{Max: 10}}.Validate())
	e := GroupConfig{Adaptive: adaptive.Config{Max: 10}}.withDefaults()
	assert.Equal(t, 10, e.MaxConcurrent, "MaxConcurrent is Adaptive.Max")
	assert.Equal(t, adaptive.Config{Min: 1, Max: 10, Initial: 10, Tolerance: 1, Smoothing: 0.2, Window: 250 * time.Millisecond}, e.Adaptive)
	assert.Equal(t, adaptive.Config{}, GroupConfig{}.withDefaults().Adaptive, "off stays off")
}

// queueing returns the average latency of a window in which a dependency
// of capacity workers, each call taking service, holds limit calls.
func queueing(service time.Duration, workers int, limit float64) float64 {
	return float64(service) * max(1, limit/float64(workers))
}

// TestAdaptiveRuleFollowsCapacity drives the rule with the windows of a
// saturated queueing dependency (every window holds the limit's calls):
// from below the capacity, the limit settles within √capacity above it, follows a halving
// of it within 40 windows and comes back when it returns, without
// overshooting the capacity by more than its headroom.
func TestAdaptiveRuleFollowsCapacity(t *testing.T) {
	a := &adaptiveLimit{cfg: adaptiveDefaults(adaptive.Config{Max: 1000}), limit: 40} // below capacity: the first window is no-load
	const service = 25 * time.Millisecond
	for _, workers := range []int{60, 30, 60} {
		var path []float64
		for range 40 {
			a.move(queueing(service, workers, a.limit), math.Round(a.limit))
			path = append(path, a.limit)
		}
		w := float64(workers)
		assert.InDelta(t, w+math.Sqrt(w)/2, a.limit, math.Sqrt(w)/2+1, "%d workers: the path %v", workers, path)
		for _, l := range path[len(path)-10:] {
			assert.InDelta(t, a.limit, l, 1, "%d workers: settled, no oscillation", workers)
		}
	}
	assert.Equal(t, float64(service), a.noLoad, "a saturated window never raises the no-load estimate")
}

// TestAdaptiveRuleWhenCallersBoundTheLoad: windows in which the bulkhead
// never held half the limit move it towards twice the peak, within [Min,
// Max], and let the no-load estimate follow a slower dependency.
func TestAdaptiveRuleWhenCallersBoundTheLoad(t *testing.T) {
	a := &adaptiveLimit{cfg: adaptiveDefaults(adaptive.Config{Min: 5, Max: 100}), limit: 100}
	for range 60 {
		a.move(float64(10*time.Millisecond), 20)
	}
	assert.InDelta(t, 40, a.limit, 0.1)
	for range 60 {
		a.move(float64(10*time.Millisecond), 1)
	}
	assert.Equal(t, 5.0, a.limit, "never below Min")
	for range 200 {
		a.move(float64(20*time.Millisecond), 1)
	}
	assert.InDelta(t, float64(20*time.Millisecond), a.noLoad, float64(time.Millisecond), "the no-load estimate follows")
}

// rounds runs n rounds of calls of g: each fills the bulkhead with up to
// calls calls at once (no more than its capacity then, so that none is
// rejected), holds them for d of the test clock, then frees them.
func rounds(t *testing.T, g *Group, clock *metrics.ManualClock, n, calls int, d time.Duration) {
	t.Helper()
	for range n {
		held := min(calls, g.Snapshot().Bulkhead.Capacity)
		h := newHolder()
		freed := false
		t.Cleanup(func() { // a failed hold leaves no call behind to hang Close
			if !freed {
				close(h.release)
			}
		})
		h.hold(t, g, held)
		clock.Advance(d)
		freed = true
		h.free(t, held)
	}
}

// TestAdaptiveLimitSizesTheBulkhead: the limit starts at Initial, is the
// bulkhead's capacity, grows while the latency stays at its no-load level
// with the bulkhead half full or more, and comes down when it triples; a
// call beyond it is a bulkhead rejection.
func TestAdaptiveLimitSizesTheBulkhead(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		g, clock := newTestGroup(t, GroupConfig{Strategy: s, Timeout: NoTimeout,
			Adaptive: adaptive.Config{Min: 2, Max: 40, Initial: 20, Window: 100 * time.Millisecond}})
		assert.Equal(t, 20, g.Snapshot().Bulkhead.Capacity)
		assert.Equal(t, adaptive.Status{Limit: 20}, g.Snapshot().Adaptive)
		assert.Equal(t, 40, g.Config().MaxConcurrent)
		rounds(t, g, clock, 5, 16, time.Second)
		up := g.Snapshot()
		assert.Greater(t, up.Adaptive.Limit, 20, "no queueing: the limit grows")
		assert.Equal(t, up.Adaptive.Limit, up.Bulkhead.Capacity)
		assert.Equal(t, time.Second, up.Adaptive.NoLoad)
		rounds(t, g, clock, 5, 16, 3*time.Second)
		down := g.Snapshot()
		assert.Less(t, down.Adaptive.Limit, up.Adaptive.Limit, "the latency tripled: the limit comes down")
		assert.Equal(t, down.Adaptive.Limit, down.Bulkhead.Capacity)
		assert.Equal(t, time.Second, down.Adaptive.NoLoad, "a window of saturated calls never raises the estimate")
		assert.Equal(t, 3*time.Second, down.Adaptive.Latency)

		h := newHolder()
		h.hold(t, g, down.Bulkhead.Capacity)
		_, info, err := ExecuteInfo(context.Background(), g, op[int]{"extra", func(context.Context) (int, error) { return 1, nil }})
		require.ErrorIs(t, err, ErrRefused)
		require.ErrorIs(t, err, isolation.ErrRejected)
		assert.Equal(t, g.rejected, info.Event, "a refusal at the adaptive limit is the bulkhead's")
		h.free(t, down.Bulkhead.Capacity)
	})
}

// TestAdaptiveWindowKeepsASampleWhole: samples that land while windows
// close count whole in one window, latency and count together: with every
// latency 1 s, every window's average is 1 s, and so is the no-load
// estimate, which keeps the lowest (a sample split between two windows
// leaves one of them below 1 s).
func TestAdaptiveWindowKeepsASampleWhole(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, Timeout: NoTimeout,
		Adaptive: adaptive.Config{Max: 40, Window: 10 * time.Microsecond}})
	var now atomic.Int64 // every sample a microsecond after the last: a window closes every 10 or so
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20_000 {
				g.adaptive.sample(time.Duration(now.Add(int64(time.Microsecond))), time.Second)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, adaptive.Status{Limit: 1, NoLoad: time.Second, Latency: time.Second}, g.Snapshot().Adaptive)
}

// TestAdaptiveLimitSheddingByPriority: priority shedding reserves its
// shares of the adaptive limit, not of Adaptive.Max.
func TestAdaptiveLimitSheddingByPriority(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, Timeout: NoTimeout,
		Adaptive: adaptive.Config{Max: 8, Initial: 4},
		Priority: priority.Config{Reserve: [numPriorities]float64{0, 0.25, 0.5, 0.75}}})
	h := newHolder()
	h.hold(t, g, 2, WithPriority(priority.P0))
	ok := op[int]{"get", func(context.Context) (int, error) { return 1, nil }}
	_, info, err := ExecuteInfo(context.Background(), g, ok, WithPriority(priority.P2))
	require.ErrorIs(t, err, ErrRefused)
	assert.Equal(t, metrics.PriorityRejected, info.Event, "P2 enters below 2 of the limit of 4")
	_, info, err = ExecuteInfo(context.Background(), g, ok, WithPriority(priority.P1))
	require.NoError(t, err)
	assert.Equal(t, metrics.Success, info.Event)
	h.free(t, 2)
}

// TestAdaptiveReconfigure: a limit that stays on keeps its value, clamped
// into the new bounds; turned off, the bulkhead is MaxConcurrent again;
// turned on again, it starts at Initial.
func TestAdaptiveReconfigure(t *testing.T) {
	strategies(t, func(t *testing.T, s Strategy) {
		g, _ := newTestGroup(t, GroupConfig{Strategy: s, Timeout: NoTimeout, Adaptive: adaptive.Config{Max: 30, Initial: 20}})
		cfg := g.Config()
		cfg.Adaptive.Max, cfg.Adaptive.Initial, cfg.MaxConcurrent = 12, 12, 0
		require.NoError(t, g.Reconfigure(cfg))
		assert.Equal(t, 12, g.Snapshot().Bulkhead.Capacity, "clamped to the new Max")
		cfg = g.Config()
		cfg.Adaptive.Max = 50
		err := g.Reconfigure(cfg)
		require.ErrorIs(t, err, ErrInvalidConfig)
		assert.ErrorContains(t, err, "MaxConcurrent 12 differs from Adaptive.Max 50")
		cfg.MaxConcurrent = 0
		require.NoError(t, g.Reconfigure(cfg))
		assert.Equal(t, 12, g.Snapshot().Bulkhead.Capacity, "kept: inside the new bounds")
		require.NoError(t, g.Reconfigure(GroupConfig{Strategy: s, Timeout: NoTimeout, MaxConcurrent: 7}))
		assert.Equal(t, 7, g.Snapshot().Bulkhead.Capacity)
		assert.Equal(t, adaptive.Status{}, g.Snapshot().Adaptive)
		require.NoError(t, g.Reconfigure(GroupConfig{Strategy: s, Timeout: NoTimeout, Adaptive: adaptive.Config{Max: 30, Initial: 9}}))
		assert.Equal(t, 9, g.Snapshot().Bulkhead.Capacity)
	})
}

// TestConservationWithAdaptiveLimit: the chaos with the adaptive limit on
// in both groups, and the clock moving meanwhile so that windows close and
// the bulkheads are resized under load: every count still agrees with what
// the callers saw.
func TestConservationWithAdaptiveLimit(t *testing.T) {
	groups := chaosRegistry(t, circuit.Config{Mode: circuit.ForcedClosed}, nil)
	for _, g := range groups {
		cfg := g.Config()
		cfg.Adaptive = adaptive.Config{Min: 2, Max: cfg.MaxConcurrent, Window: time.Millisecond}
		require.NoError(t, g.Reconfigure(cfg))
	}
	clock := groups[0].clock.(*metrics.ManualClock)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for range 2_000_000 { // 2 s in all: within the metrics' and breakers' windows, which the checks read
			select {
			case <-stop:
				return
			default:
				clock.Advance(time.Microsecond)
				runtime.Gosched()
			}
		}
	}()
	total, rejected := chaosRefusals(t, groups, chaosCalls/16, metrics.SemaphoreRejected)
	close(stop)
	<-stopped
	t.Logf("%d calls, %d semaphore rejections", total, rejected)
	for _, g := range groups {
		s := g.Snapshot()
		assert.Positive(t, s.Adaptive.Latency, "%s: windows closed during the chaos", g.name)
		assert.Equal(t, s.Adaptive.Limit, s.Bulkhead.Capacity, g.name)
	}
}
