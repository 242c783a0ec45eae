package circuit

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/logtest"
	"github.com/bulwark-go/bulwark/metrics"
)

// reconfigured returns the breaker's config with change applied.
func (r *rig) reconfigured(change func(*Config)) Config {
	c := r.b.Config()
	change(&c)
	return c
}

func TestReconfigureThresholdTakesEffectOnKeptWindow(t *testing.T) {
	r := newRig(t, Config{MinRequests: 10})
	r.run("7*s 3*f =closed")
	require.NoError(t, r.b.Reconfigure(r.reconfigured(func(c *Config) { c.FailureRatio = 0.3 })))
	require.Equal(t, int64(10), r.b.Snapshot().Health.Requests, "same window shape: the counts stay")
	r.run("f =open") // 4/11 = 0.36: over the new ratio, under the old one
	require.Equal(t, uint64(1), r.b.engine().Snapshot().Generation)
	require.Equal(t, 0.3, r.b.Snapshot().Config.FailureRatio)
}

func TestReconfigureRejectsAndChangesNothing(t *testing.T) {
	r := newRig(t, Config{MinRequests: 10})
	before := r.b.Config()
	r.run("5*s")
	for name, change := range map[string]func(*Config){
		"FailureRatio": func(c *Config) { c.FailureRatio = 2 },
		"Name":         func(c *Config) { c.Name = "other" },
		"Clock":        func(c *Config) { c.Clock = new(metrics.ManualClock) },
		"Mode":         func(c *Config) { c.Mode = ForcedOpen },
		"WarmUp":       func(c *Config) { c.WarmUp = time.Minute },
	} {
		err := r.b.Reconfigure(r.reconfigured(change))
		require.ErrorIs(t, err, ErrInvalidConfig, name)
		require.ErrorContains(t, err, name)
		require.ErrorIs(t, r.b.engine().CheckReconfigure(r.reconfigured(change)), ErrInvalidConfig, name)
	}
	s := r.b.Snapshot()
	require.Zero(t, r.b.engine().Snapshot().Generation)
	require.Equal(t, int64(5), s.Health.Requests)
	require.Equal(t, before.FailureRatio, r.b.Config().FailureRatio)
	require.Equal(t, Normal, s.Mode)
}

func TestReconfigureNewWindowShapeStartsEmpty(t *testing.T) {
	r := newRig(t, Config{MinRequests: 4})
	r.run("3*f")
	require.NoError(t, r.b.Reconfigure(r.reconfigured(func(c *Config) {
		c.Window = metrics.Window{Length: 20 * time.Second, Buckets: 20}
	})))
	s := r.b.Snapshot()
	require.Zero(t, s.Health.Requests, "a new shape starts a new, empty window")
	require.Equal(t, 20*time.Second, r.b.Config().Window.Length)
	r.run("f =closed 3*f =open") // MinRequests fresh outcomes are needed again
}

func TestReconfigureOpenDurationAppliesFromNextOpening(t *testing.T) {
	r := newRig(t, Config{MinRequests: 1, OpenDuration: time.Second, HalfOpenSuccesses: 1})
	r.run("f =open")
	require.NoError(t, r.b.Reconfigure(r.reconfigured(func(c *Config) {
		c.OpenDuration, c.OpenMaxDuration, c.HalfOpenMaxWait = 3*time.Second, 0, 0
	})))
	r.run("+999ms x +1ms =half-open s =closed") // the current open period ends as scheduled
	r.run("f =open +2999ms x +1ms =half-open")
}

func TestReconfigureLogsWhatChanged(t *testing.T) {
	var buf logtest.Buffer
	clock := new(metrics.ManualClock)
	b, err := New(Config{Name: "db", Clock: clock, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	require.NoError(t, err)
	c := b.Config()
	c.FailureRatio, c.MinRequests = 0.25, 7
	require.NoError(t, b.Reconfigure(c))
	require.Contains(t, buf.String(), `msg="circuit breaker reconfigured" breaker=db generation=1 MinRequests="20 -> 7" FailureRatio="0.5 -> 0.25"`)
}

// TestReconfigureUnderLoad reconfigures thresholds and the window shape
// continuously while calls flow, for the race detector, and checks that
// every admitted call's permit is usable and the breaker ends consistent.
func TestReconfigureUnderLoad(t *testing.T) {
	r := newRig(t, Config{MinRequests: 5, OpenDuration: time.Millisecond, HalfOpenProbes: 2})
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				o := metrics.Success
				if (i+w)%3 == 0 {
					o = metrics.Failure
				}
				if p, err := r.b.Allow(); err == nil {
					p.Record(o, time.Millisecond)
				}
				r.clock.Advance(100 * time.Microsecond)
			}
		})
	}
	for i := range 300 {
		require.NoError(t, r.b.Reconfigure(r.reconfigured(func(c *Config) {
			c.FailureRatio = []float64{0.2, 0.5, 0.9}[i%3]
			c.Window.Buckets = []int{10, 5}[i%2]
			c.HalfOpenProbes = 1 + i%3
		})))
		_ = r.b.Snapshot()
	}
	stop.Store(true)
	wg.Wait()
	require.Equal(t, uint64(300), r.b.engine().Snapshot().Generation)
}
