package circuit

import (
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/metrics"
)

func TestHalfOpenProbeLimitUnderHammering(t *testing.T) {
	for _, probes := range []int{1, 3} {
		r := newRig(t, with(func(c *Config) {
			c.HalfOpenProbes = probes
			c.HalfOpenSuccesses = 1 << 30 // stay half-open
			c.HalfOpenMaxWait = time.Hour
		}))
		r.run("4*f +1s =half-open")

		var inFlight, peak, admitted atomic.Int64
		start := make(chan struct{})
		var wg sync.WaitGroup
		for g := range 64 {
			wg.Go(func() {
				<-start
				for i := range 2000 {
					p, err := r.b.Allow()
					if err != nil {
						if !assert.ErrorIs(t, err, errProbeLimit) {
							return
						}
						continue
					}
					admitted.Add(1)
					n := inFlight.Add(1)
					for cur := peak.Load(); n > cur && !peak.CompareAndSwap(cur, n); cur = peak.Load() {
					}
					runtime.Gosched()
					inFlight.Add(-1) // before Record: Record frees the slot
					o := metrics.Success
					if (g+i)%3 == 0 {
						o = metrics.Cancelled
					}
					p.Record(o, time.Millisecond)
				}
			})
		}
		close(start)
		wg.Wait()
		assert.LessOrEqual(t, peak.Load(), int64(probes), "probes in flight")
		assert.Positive(t, admitted.Load())
		s := r.b.Snapshot()
		assert.Equal(t, HalfOpen, s.State)
		assert.Zero(t, s.Probes, "every slot was given back")
	}
}

// Many goroutines call, record, read and switch modes while the clock moves;
// run with -race. Transitions must arrive one at a time, in order, forming a
// chain, and OnTransition must be able to call back into the breaker.
func TestConcurrentUse(t *testing.T) {
	var delivering atomic.Bool
	var mu sync.Mutex
	var chain []Transition
	r := &rig{t: t, clock: new(metrics.ManualClock)}
	cfg := with(func(c *Config) {
		c.HalfOpenProbes = 2
		c.OpenBackoff = 2
		c.OpenMaxDuration = 2 * time.Second
		c.OpenDuration = 200 * time.Millisecond
		c.RampDuration = 300 * time.Millisecond
		c.SlowCallDuration = 50 * time.Millisecond
		c.SlowCallRatio = 0.8
		c.Clock, c.Logger = r.clock, slog.New(slog.DiscardHandler)
		c.OnTransition = func(tr Transition) {
			if !delivering.CompareAndSwap(false, true) {
				t.Error("OnTransition called concurrently")
			}
			_ = r.b.State() // would deadlock if the breaker's lock were held
			mu.Lock()
			chain = append(chain, tr)
			mu.Unlock()
			delivering.Store(false)
		}
	})
	var err error
	r.b, err = New(cfg)
	require.NoError(t, err)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() { // the clock and the operator
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r.clock.Advance(10 * time.Millisecond)
			_ = r.b.Snapshot()
			if i%50 == 0 {
				r.b.SetMode([]Mode{Normal, ObserveOnly, ForcedOpen, Normal, ForcedClosed}[(i/50)%5])
			}
			runtime.Gosched()
		}
	})
	var calls atomic.Int64
	var workers sync.WaitGroup
	for g := range 16 {
		workers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 3000 {
				p, err := r.b.Allow()
				if err != nil {
					if !assert.ErrorIs(t, err, ErrOpen) {
						return
					}
					continue
				}
				calls.Add(1)
				lat := time.Duration(rng.IntN(100)) * time.Millisecond
				p.Record(metrics.Event(rng.IntN(4)), lat)
			}
		})
	}
	workers.Wait()
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, chain)
	assert.Positive(t, calls.Load())
	for i := 1; i < len(chain); i++ {
		assert.Equal(t, chain[i-1].To, chain[i].From, "transition %d", i)
		assert.LessOrEqual(t, chain[i-1].At, chain[i].At, "transition %d", i)
	}
	s := r.b.Snapshot()
	assert.Zero(t, s.Probes, "every probe was recorded")
	assert.Equal(t, chain[len(chain)-1].To, s.State)
}

func TestRampUpShareConcurrent(t *testing.T) {
	const ramp = 10 * time.Second
	r := newRig(t, with(func(c *Config) { c.RampDuration = ramp }))
	r.run("4*f +1s s s =closed")
	closedAt := r.clock.Now()
	for _, frac := range []float64{0.25, 0.5, 0.75} {
		r.clock.Set(closedAt + time.Duration(frac*float64(ramp)))
		var admitted, total atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 1000 {
					total.Add(1)
					if p, err := r.b.Allow(); err == nil {
						admitted.Add(1)
						p.Record(metrics.Success, 0)
					}
				}
			})
		}
		wg.Wait()
		want := 0.1 + 0.9*frac
		assert.InDelta(t, want, float64(admitted.Load())/float64(total.Load()), 0.05, "at %.0f%%", frac*100)
	}
}
