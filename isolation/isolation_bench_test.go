package isolation

import (
	"context"
	"testing"

	"github.com/panjf2000/ants/v2"
)

// nop is the work every benchmark runs: a real call that does nothing, so the numbers are the
// cost of the isolation around it.
//
//go:noinline
func nop(context.Context) {}

// benchSize is large enough that no benchmark caller is ever rejected or queued.
const benchSize = 16

// BenchmarkIsolation compares, in one run, the cost of running nop:
//   - direct: a plain call (the floor);
//   - semaphore: Semaphore.Execute on the caller's goroutine;
//   - pool: Pool.Execute, a hand-off to a worker goroutine and back;
//   - ants: the baseline for pool, raw ants Submit of a closure, waiting on a channel;
//   - go: a new goroutine per call, waiting on a channel.
//
// Each runs serially and under b.RunParallel. Compare pool with ants, and semaphore with
// direct, in the same run: ratios travel between machines, nanoseconds do not.
func BenchmarkIsolation(b *testing.B) {
	ctx := context.Background()
	modes := []struct {
		name string
		run  func(b *testing.B, body func(pb func() bool))
	}{
		{"serial", func(b *testing.B, body func(func() bool)) { body(b.Loop) }},
		{"parallel", func(b *testing.B, body func(func() bool)) {
			b.RunParallel(func(pb *testing.PB) { body(pb.Next) })
		}},
	}
	for _, m := range modes {
		b.Run("direct/"+m.name, func(b *testing.B) {
			b.ReportAllocs()
			work := nop
			m.run(b, func(next func() bool) {
				for next() {
					work(ctx)
				}
			})
		})
		b.Run("semaphore/"+m.name, func(b *testing.B) {
			b.ReportAllocs()
			s, err := NewSemaphore(benchSize)
			if err != nil {
				b.Fatal(err)
			}
			m.run(b, func(next func() bool) {
				for next() {
					if err := s.Execute(ctx, nop); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		b.Run("pool/"+m.name, func(b *testing.B) {
			b.ReportAllocs()
			p, err := NewPool(PoolConfig{Size: benchSize})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(context.Background())
			m.run(b, func(next func() bool) {
				for next() {
					if err := p.Execute(ctx, nop); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		b.Run("ants/"+m.name, func(b *testing.B) {
			b.ReportAllocs()
			p, err := ants.NewPool(benchSize)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Release()
			m.run(b, func(next func() bool) {
				done := make(chan struct{}, 1)
				for next() {
					if err := p.Submit(func() {
						nop(ctx)
						done <- struct{}{}
					}); err != nil {
						b.Error(err)
						return
					}
					<-done
				}
			})
		})
		b.Run("go/"+m.name, func(b *testing.B) {
			b.ReportAllocs()
			m.run(b, func(next func() bool) {
				done := make(chan struct{}, 1)
				for next() {
					go func() {
						nop(ctx)
						done <- struct{}{}
					}()
					<-done
				}
			})
		})
	}
}
