package command

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkExecuteScaling is issue 24's "two cores do twice the work" row:
// the semaphore path without a timer, serially and under RunParallel (one
// goroutine per P), with the parallel goroutines calling distinct commands
// of one group, one command each of distinct groups, or all the same
// command. The scaling of a case is serial ns/op divided by its ns/op in the
// same run: 2 on two cores when nothing is shared.
//
//	go test -run '^$' -bench ExecuteScaling -count 6 ./command/
func BenchmarkExecuteScaling(b *testing.B) {
	cfg := GroupConfig{Strategy: Semaphore, MaxConcurrent: 64, Timeout: NoTimeout}
	ctx := context.Background()
	run := func(b *testing.B, g *Group, name string, next func() bool) {
		for next() {
			if _, err := Execute(ctx, g, benchCmd{}, WithName(name)); err != nil {
				b.Error(err)
				return
			}
		}
	}
	// each gives the parallel goroutines a group and a command name apiece:
	// the i-th goroutine to start gets at(i).
	each := func(b *testing.B, at func(i int) (*Group, string)) {
		b.ReportAllocs()
		var started atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			g, name := at(int(started.Add(1) - 1))
			run(b, g, name, pb.Next)
		})
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		run(b, benchGroup(b, cfg), "a", b.Loop)
	})
	b.Run("distinct-commands", func(b *testing.B) {
		g := benchGroup(b, cfg)
		each(b, func(i int) (*Group, string) { return g, fmt.Sprint("cmd-", i) })
	})
	b.Run("distinct-groups", func(b *testing.B) {
		groups := make([]*Group, 0, 64)
		for range cap(groups) {
			groups = append(groups, benchGroup(b, cfg))
		}
		each(b, func(i int) (*Group, string) { return groups[i%len(groups)], "a" })
	})
	b.Run("shared-command", func(b *testing.B) {
		g := benchGroup(b, cfg)
		each(b, func(int) (*Group, string) { return g, "a" })
	})
}
