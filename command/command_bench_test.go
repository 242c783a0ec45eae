package command

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/panjf2000/ants/v2"

	"github.com/bulwark-go/bulwark/metrics"
)

// Run with: go test -run='^$' -bench=. -benchmem -count=6 ./command/
//
// Each Execute benchmark has its baseline in this file, measured in the same
// run: the clock reads every call needs (BenchmarkClock), the
// context.WithTimeout every call with a timeout needs
// (BenchmarkContextWithTimeout), and a raw ants handoff for the pool, bare
// (BenchmarkAntsSubmitWait) and of a closure returning a result
// (BenchmarkAntsSubmitWaitResult).

// benchCmd is the cheapest command: no state and an immediate result.
type benchCmd struct{}

func (benchCmd) Run(context.Context) (int, error) { return 1, nil }

// benchFields is a realistic command: a struct with a few fields, passed by
// value (Execute keeps its type, so this allocates nothing either).
type benchFields struct {
	id     int64
	tenant string
	fields []string
}

func (c benchFields) Run(context.Context) (int, error) {
	return int(c.id) + len(c.tenant) + len(c.fields), nil
}

func benchGroup(b *testing.B, cfg GroupConfig) *Group {
	b.Helper()
	reg := NewRegistry(RegistryConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	b.Cleanup(func() {
		if err := reg.Close(context.Background()); err != nil {
			b.Error(err)
		}
	})
	g, err := reg.NewGroup("bench", cfg)
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// sink keeps results alive so the compiler cannot drop the work.
var sink time.Duration

// BenchmarkClock is the floor of every Execute: the two readings of
// metrics.SystemClock (start and end) that it makes per call.
func BenchmarkClock(b *testing.B) {
	clock := metrics.SystemClock()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		var d time.Duration
		for b.Loop() {
			t0 := clock.Now()
			d += clock.Now() - t0
		}
		sink = d
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var d time.Duration
			for pb.Next() {
				t0 := clock.Now()
				d += clock.Now() - t0
			}
			sink = d
		})
	})
}

// BenchmarkContextWithTimeout is what a timeout costs before Execute does
// anything: the context (with its timer) that Run gets, its Done channel
// (the pool waits on it) and its cancellation.
func BenchmarkContextWithTimeout(b *testing.B) {
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, cancel := context.WithTimeout(ctx, time.Second)
			_ = c.Done()
			cancel()
		}
	})
}

// benchExecute measures Execute with the empty command and with one with
// fields, each in a group of cfg of its own, serially and in parallel.
func benchExecute(b *testing.B, cfg GroupConfig, opts ...Option) {
	id, tenant, fields := int64(7), "acme", []string{"name", "email"} // not constants: no static data
	b.Run("empty", func(b *testing.B) { benchCommand(b, benchGroup(b, cfg), benchCmd{}, opts) })
	b.Run("fields", func(b *testing.B) {
		benchCommand(b, benchGroup(b, cfg), benchFields{id: id, tenant: tenant, fields: fields}, opts)
	})
}

func benchCommand[C Runner[int]](b *testing.B, g *Group, cmd C, opts []Option) {
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Execute(ctx, g, cmd, opts...); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := Execute(ctx, g, cmd, opts...); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkExecuteSemaphoreNoTimeout: both breakers, metrics and outcome
// classification, on the caller's goroutine, without a timer. Target: the
// clock baseline + 80 ns, 0 allocs.
func BenchmarkExecuteSemaphoreNoTimeout(b *testing.B) {
	benchExecute(b, GroupConfig{Strategy: Semaphore, MaxConcurrent: 64, Timeout: NoTimeout})
}

// BenchmarkExecuteFunc is the semaphore case with a command built by Func
// (named through Namer, closures that capture nothing).
func BenchmarkExecuteFunc(b *testing.B) {
	g := benchGroup(b, GroupConfig{Strategy: Semaphore, MaxConcurrent: 64, Timeout: NoTimeout})
	benchCommand(b, g, Func("get", func(context.Context) (int, error) { return 1, nil }, nil), nil)
}

// BenchmarkExecuteSemaphoreTimeout adds the per-call timeout (a
// deadline.Context: one allocation, no timer unless Run waits on it).
// Target: within 2× of BenchmarkExecuteSemaphoreNoTimeout.
func BenchmarkExecuteSemaphoreTimeout(b *testing.B) {
	benchExecute(b, GroupConfig{Strategy: Semaphore, MaxConcurrent: 64, Timeout: time.Second})
}

// BenchmarkExecutePool: the same on a pool worker, with a timeout. Target:
// within 1.5× of BenchmarkAntsSubmitWaitResult, at most 2 allocations.
func BenchmarkExecutePool(b *testing.B) {
	benchExecute(b, GroupConfig{MaxConcurrent: 64, Timeout: time.Second})
}

// BenchmarkExecutePoolNoTimeout is the pool without a timer.
func BenchmarkExecutePoolNoTimeout(b *testing.B) {
	benchExecute(b, GroupConfig{MaxConcurrent: 64, Timeout: NoTimeout})
}

// BenchmarkAntsSubmitWait is the raw handoff the pool builds on: submit a
// task to an ants pool and wait for it to signal completion.
func BenchmarkAntsSubmitWait(b *testing.B) {
	pool, err := ants.NewPool(64)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = pool.ReleaseTimeout(5 * time.Second) }()
	submitWait := func(b *testing.B, next func() bool) {
		done := make(chan struct{}, 1)
		task := func() { done <- struct{}{} }
		for next() {
			if err := pool.Submit(task); err != nil {
				b.Error(err)
				return
			}
			<-done
		}
	}
	serialAndParallel(b, submitWait)
}

// BenchmarkAntsSubmitWaitResult is the baseline of a pool call that hands a
// result back: what a caller of ants alone writes to run work with a
// context on a worker and get its value and error, a closure per call that
// stores them and signals. The target of a pool Execute with a timeout
// (BenchmarkExecutePool) is 1.5× this.
func BenchmarkAntsSubmitWaitResult(b *testing.B) {
	pool, err := ants.NewPool(64)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = pool.ReleaseTimeout(5 * time.Second) }()
	run := benchCmd{}.Run
	submitWait := func(b *testing.B, next func() bool) {
		ctx := context.Background()
		done := make(chan struct{}, 1)
		total := 0
		for next() {
			var v int
			var runErr error
			if err := pool.Submit(func() { v, runErr = run(ctx); done <- struct{}{} }); err != nil {
				b.Error(err)
				return
			}
			<-done
			if runErr != nil {
				b.Error(runErr)
				return
			}
			total += v
		}
		sink = time.Duration(total)
	}
	serialAndParallel(b, submitWait)
}

// serialAndParallel runs loop, which calls next until it reports false,
// serially (b.Loop) and under RunParallel, as sub-benchmarks.
func serialAndParallel(b *testing.B, loop func(b *testing.B, next func() bool)) {
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		loop(b, b.Loop)
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) { loop(b, pb.Next) })
	})
}
