package bench

// Overhead of protecting a trivial function, success path only: every breaker is configured so it
// never trips and every bulkhead so it never rejects (big limits, long timeouts), so each
// benchmark measures what a healthy call pays. Each case runs serially (BenchmarkX) and under
// b.RunParallel (BenchmarkXParallel, GOMAXPROCS goroutines). Run with -benchmem. Beside ns/op
// (wall time) each reports cpu-ns/op, the process's CPU time per call (Unix only: getrusage).
//
// Cases are built to be compared in like-for-like pairs (cmd/report names them): the same
// isolation (caller's goroutine or a handoff to another), the same timer or none, and no fallback
// in any case. run.sh runs each case in a process of its own, in rounds, so that one case's
// background goroutines (sentinel's collectors, hystrix-go's metric exchangers) and its position
// in the run do not bias another.
//
// Groups:
//   - Command: bulkhead + breaker, with and without a timeout (bulwark, hystrix-go, failsafe-go).
//   - Breaker: breaker only (bulwark circuit, gobreaker v2, failsafe-go, sentinel-golang).
//   - Baseline: what the pieces cost raw (direct call, semaphores, the raw ants handoff every pool
//     ratio is taken against, a go statement, clock reads).

import (
	"context"
	"testing"
	"time"

	"github.com/afex/hystrix-go/hystrix"
	sentinel "github.com/alibaba/sentinel-golang/api"
	sentinelcb "github.com/alibaba/sentinel-golang/core/circuitbreaker"
	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/internal/cputime"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/panjf2000/ants/v2"
	"github.com/sony/gobreaker/v2"
	"golang.org/x/sync/semaphore"
)

// Limits that the benchmarks never reach.
const (
	bigLimit   = 1 << 16
	longWait   = 10 * time.Second
	poolWorker = 64
)

// work is the protected function: trivial, but not inlinable so the call cannot be optimised away.
//
//go:noinline
func work() (int, error) { return 42, nil }

// benchCase builds the operation under test. setup runs once per benchmark (outside the timer);
// the function it returns runs once per goroutine and returns the per-call operation, so cases that
// need per-goroutine state (a done channel) can have it.
type benchCase struct {
	name  string
	setup func(b *testing.B) func() func()
}

func runSerial(b *testing.B, c benchCase) {
	op := c.setup(b)()
	b.ReportAllocs()
	start := cputime.Used(b)
	for b.Loop() {
		op()
	}
	reportCPU(b, start)
}

func runParallel(b *testing.B, c benchCase) {
	newOp := c.setup(b)
	b.ReportAllocs()
	b.ResetTimer()
	start := cputime.Used(b)
	b.RunParallel(func(pb *testing.PB) {
		op := newOp()
		for pb.Next() {
			op()
		}
	})
	reportCPU(b, start)
}

// reportCPU reports the process's CPU time per call since start as cpu-ns/op. On a shared
// machine ns/op (wall time) also counts the time other processes held the cores; the CPU time
// does not, so it is the steadier figure under load.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cputime.Used(b)-start)/float64(b.N), "cpu-ns/op")
}

func runCases(b *testing.B, cases []benchCase, parallel bool) {
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			if parallel {
				runParallel(b, c)
			} else {
				runSerial(b, c)
			}
		})
	}
}

// same returns a per-goroutine constructor that hands every goroutine the same operation (for
// cases whose operation is safe for concurrent use as is).
func same(op func()) func() func() { return func() func() { return op } }

func check(b *testing.B, err error) {
	if err != nil {
		b.Fatal(err)
	}
}

// ---- Command: bulkhead + breaker, with and without a timeout ----

// commandCases: which runs on the caller's goroutine and which arms a timer is in each name's
// setup; cmd/report pairs them accordingly.
func commandCases() []benchCase {
	return []benchCase{
		{"bulwark-semaphore", setupBulwark(command.Semaphore, command.NoTimeout)},
		{"bulwark-semaphore-timeout", setupBulwark(command.Semaphore, longWait)},
		{"bulwark-pool", setupBulwark(command.Thread, longWait)},
		{"bulwark-pool-notimeout", setupBulwark(command.Thread, command.NoTimeout)},
		{"hystrix-go", setupHystrix},
		{"failsafe-go", setupFailsafeComposed(false)},
		{"failsafe-go-timeout", setupFailsafeComposed(true)},
	}
}

func BenchmarkCommand(b *testing.B)         { runCases(b, commandCases(), false) }
func BenchmarkCommandParallel(b *testing.B) { runCases(b, commandCases(), true) }

// nopCmd is the bulwark command around work.
type nopCmd struct{}

func (nopCmd) Run(context.Context) (int, error) { return work() }

// setupBulwark creates a group with both breakers at their defaults (which a success never trips)
// and a bulkhead that never fills: MaxConcurrent is the pool size (Thread) or the permits
// (Semaphore).
func setupBulwark(strategy command.Strategy, timeout time.Duration) func(b *testing.B) func() func() {
	return func(b *testing.B) func() func() {
		reg := command.NewRegistry(command.RegistryConfig{})
		size := bigLimit
		if strategy == command.Thread {
			size = poolWorker
		}
		g, err := reg.NewGroup("bench", command.GroupConfig{Strategy: strategy, MaxConcurrent: size, Timeout: timeout})
		check(b, err)
		b.Cleanup(func() { check(b, reg.Close(context.Background())) })
		ctx := context.Background()
		return same(func() {
			if r, err := command.Execute[int](ctx, g, nopCmd{}); err != nil || r != 42 {
				b.Fatal("bulwark:", r, err)
			}
		})
	}
}

// setupHystrix configures a hystrix-go command that never times out, trips or rejects. Do always
// runs the function on a goroutine of its own and arms a timer (hystrix-go has no other mode),
// so its like is bulwark-pool. The result travels through a captured variable, as hystrix-go's
// Do returns only an error.
func setupHystrix(b *testing.B) func() func() {
	name := "bench-" + b.Name()
	hystrix.ConfigureCommand(name, hystrix.CommandConfig{
		Timeout:                int(longWait / time.Millisecond),
		MaxConcurrentRequests:  bigLimit,
		RequestVolumeThreshold: bigLimit,
		ErrorPercentThreshold:  100,
	})
	return func() func() {
		return func() {
			var r int
			err := hystrix.Do(name, func() error {
				var err error
				r, err = work()
				return err
			}, nil)
			if err != nil || r != 42 {
				b.Fatal("hystrix-go:", r, err)
			}
		}
	}
}

// setupFailsafeComposed composes failsafe-go's breaker (time-based failure rate, like bulwark's
// rolling window) and bulkhead, and with withTimeout its timeout policy: the same protection as a
// bulwark semaphore command without or with a timeout. failsafe-go runs the function on the
// caller's goroutine either way; its timeout arms a time.AfterFunc that cancels the execution.
func setupFailsafeComposed(withTimeout bool) func(b *testing.B) func() func() {
	return func(b *testing.B) func() func() {
		cb := circuitbreaker.NewBuilder[int]().
			WithFailureRateThreshold(0.5, 20, longWait).
			WithDelay(5 * time.Second).
			Build()
		policies := []failsafe.Policy[int]{cb, bulkhead.New[int](bigLimit)}
		if withTimeout {
			policies = append(policies, timeout.New[int](longWait))
		}
		exec := failsafe.With(policies...)
		return same(func() {
			if r, err := exec.Get(work); err != nil || r != 42 {
				b.Fatal("failsafe-go:", r, err)
			}
		})
	}
}

// ---- Breaker only ----

func breakerCases() []benchCase {
	return []benchCase{
		{"bulwark", setupBulwarkBreaker},
		{"bulwark-timed", setupBulwarkBreakerTimed},
		{"gobreaker-v2", setupGobreakerRolling},
		{"gobreaker-v2-nowindow", setupGobreakerDefault},
		{"failsafe-go", setupFailsafeBreaker},
		{"sentinel-golang", setupSentinel},
	}
}

func BenchmarkBreaker(b *testing.B)         { runCases(b, breakerCases(), false) }
func BenchmarkBreakerParallel(b *testing.B) { runCases(b, breakerCases(), true) }

// setupBulwarkBreaker: Allow, the call, Record. Slow-call detection is off (the default), so the
// latency is not needed and the caller passes 0.
func setupBulwarkBreaker(b *testing.B) func() func() {
	cb, err := circuit.New(circuit.Config{Name: "bench"})
	check(b, err)
	return same(func() {
		p, err := cb.Allow()
		if err != nil {
			b.Fatal("bulwark circuit:", err)
		}
		r, err := work()
		if err != nil {
			p.Record(metrics.Failure, 0)
		} else {
			p.Record(metrics.Success, 0)
		}
		if r != 42 {
			b.Fatal("bulwark circuit: bad result", r)
		}
	})
}

// setupBulwarkBreakerTimed also measures the call with the breaker's clock, as a caller with
// slow-call detection on would: two clock reads per call, and Record's own.
func setupBulwarkBreakerTimed(b *testing.B) func() func() {
	clock := metrics.SystemClock()
	cb, err := circuit.New(circuit.Config{Name: "bench", Clock: clock, SlowCallDuration: time.Second, SlowCallRatio: 1})
	check(b, err)
	return same(func() {
		p, err := cb.Allow()
		if err != nil {
			b.Fatal("bulwark circuit:", err)
		}
		start := clock.Now()
		r, err := work()
		end := clock.Now()
		if err != nil {
			p.Record(metrics.Failure, end-start)
		} else {
			p.Record(metrics.Success, end-start)
		}
		if r != 42 {
			b.Fatal("bulwark circuit: bad result", r)
		}
	})
}

// setupGobreakerRolling uses gobreaker v2's rolling window (10 s in 1 s buckets), the same shape
// as bulwark's default window.
func setupGobreakerRolling(b *testing.B) func() func() {
	cb := gobreaker.NewCircuitBreaker[int](gobreaker.Settings{
		Name: "bench", Interval: longWait, BucketPeriod: time.Second,
	})
	return same(func() {
		if r, err := cb.Execute(work); err != nil || r != 42 {
			b.Fatal("gobreaker:", r, err)
		}
	})
}

// setupGobreakerDefault uses gobreaker's defaults: one bucket that is never cleared in the closed
// state (no window), consecutive-failure trip.
func setupGobreakerDefault(b *testing.B) func() func() {
	cb := gobreaker.NewCircuitBreaker[int](gobreaker.Settings{Name: "bench"})
	return same(func() {
		if r, err := cb.Execute(work); err != nil || r != 42 {
			b.Fatal("gobreaker:", r, err)
		}
	})
}

func setupFailsafeBreaker(b *testing.B) func() func() {
	cb := circuitbreaker.NewBuilder[int]().
		WithFailureRateThreshold(0.5, 20, longWait).
		WithDelay(5 * time.Second).
		Build()
	exec := failsafe.With[int](cb)
	return same(func() {
		if r, err := exec.Get(work); err != nil || r != 42 {
			b.Fatal("failsafe-go:", r, err)
		}
	})
}

// setupSentinel loads an error-ratio circuit-breaker rule (10 s window, 10 buckets) on one
// resource, starting sentinel first (startSentinel, once per process: its collectors then run only
// in the processes that measure it).
func setupSentinel(b *testing.B) func() func() {
	check(b, startSentinel())
	res := "bench-" + b.Name()
	_, err := sentinelcb.LoadRules([]*sentinelcb.Rule{{
		Resource:                     res,
		Strategy:                     sentinelcb.ErrorRatio,
		RetryTimeoutMs:               5000,
		MinRequestAmount:             20,
		StatIntervalMs:               10000,
		StatSlidingWindowBucketCount: 10,
		Threshold:                    0.5,
	}})
	check(b, err)
	return same(func() {
		e, blocked := sentinel.Entry(res)
		if blocked != nil {
			b.Fatal("sentinel blocked:", blocked)
		}
		r, err := work()
		if err != nil {
			sentinel.TraceError(e, err)
		}
		e.Exit()
		if r != 42 {
			b.Fatal("sentinel: bad result", r)
		}
	})
}

// ---- Baselines ----

func baselineCases() []benchCase {
	return []benchCase{
		{"direct", setupDirect},
		{"chan-semaphore", setupChanSemaphore},
		{"xsync-semaphore", setupXSyncSemaphore},
		{rawAnts, setupAnts},
		{"go-chan", setupGoChan},
		{"time-now-since", setupTimeNowSince},
		{"time-since-mono", setupTimeSinceMono},
	}
}

func BenchmarkBaseline(b *testing.B)         { runCases(b, baselineCases(), false) }
func BenchmarkBaselineParallel(b *testing.B) { runCases(b, baselineCases(), true) }

func setupDirect(b *testing.B) func() func() {
	return same(func() {
		if r, err := work(); err != nil || r != 42 {
			b.Fatal("direct:", r, err)
		}
	})
}

func setupChanSemaphore(b *testing.B) func() func() {
	sem := make(chan struct{}, bigLimit)
	return same(func() {
		sem <- struct{}{}
		r, err := work()
		<-sem
		if err != nil || r != 42 {
			b.Fatal("chan semaphore:", r, err)
		}
	})
}

func setupXSyncSemaphore(b *testing.B) func() func() {
	sem := semaphore.NewWeighted(bigLimit)
	return same(func() {
		if !sem.TryAcquire(1) {
			b.Fatal("x/sync semaphore full")
		}
		r, err := work()
		sem.Release(1)
		if err != nil || r != 42 {
			b.Fatal("x/sync semaphore:", r, err)
		}
	})
}

// rawAnts names the one raw pool baseline every pool ratio is taken against (cmd/report uses the
// same name).
const rawAnts = "ants-submit-wait"

// result is what the raw ants closure hands back.
type result struct {
	r   int
	err error
}

// setupAnts is the raw ants baseline: Submit a closure that calls the function and sends its
// result back, then wait for it. The channel is made once per goroutine and reused, the cheapest
// way a caller gets a result back from ants; the closure is the one allocation per call.
func setupAnts(b *testing.B) func() func() {
	pool, err := ants.NewPool(poolWorker)
	check(b, err)
	b.Cleanup(pool.Release)
	return func() func() {
		done := make(chan result, 1)
		return func() {
			if err := pool.Submit(func() {
				r, err := work()
				done <- result{r, err}
			}); err != nil {
				b.Fatal("ants:", err)
			}
			if res := <-done; res.err != nil || res.r != 42 {
				b.Fatal("ants:", res.r, res.err)
			}
		}
	}
}

func setupGoChan(b *testing.B) func() func() {
	return func() func() {
		done := make(chan struct{}, 1)
		return func() {
			var r int
			var err error
			go func() {
				r, err = work()
				done <- struct{}{}
			}()
			<-done
			if err != nil || r != 42 {
				b.Fatal("go+chan:", r, err)
			}
		}
	}
}

// setupTimeNowSince measures a call the usual way: time.Now reads wall and monotonic clocks.
func setupTimeNowSince(b *testing.B) func() func() {
	return same(func() {
		start := time.Now()
		r, err := work()
		if d := time.Since(start); d < 0 || err != nil || r != 42 {
			b.Fatal("time:", d, r, err)
		}
	})
}

// setupTimeSinceMono measures a call with two time.Since reads of a fixed origin: monotonic clock
// only, what a hot path that needs durations (not dates) can pay.
func setupTimeSinceMono(b *testing.B) func() func() {
	origin := time.Now()
	return same(func() {
		start := time.Since(origin)
		r, err := work()
		if d := time.Since(origin) - start; d < 0 || err != nil || r != 42 {
			b.Fatal("time:", d, r, err)
		}
	})
}
