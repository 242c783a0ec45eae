package command

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bulwark-go/bulwark/internal/cputime"
	"github.com/bulwark-go/bulwark/metrics"
)

// busyRegistry returns a registry on a manual clock with one semaphore group
// of n commands, each called in every bucket of the default window with
// latencies from 1 to 8 ms (four octaves of histogram bins): every bucket
// live, as in bench/cmd/scale's snapshot row.
func busyRegistry(b *testing.B, n int) *Registry {
	clock := new(metrics.ManualClock)
	reg := NewRegistry(RegistryConfig{Clock: clock, Logger: discardLogger})
	b.Cleanup(func() {
		if err := reg.Close(context.Background()); err != nil {
			b.Error(err)
		}
	})
	g, err := reg.NewGroup("g", GroupConfig{Strategy: Semaphore, MaxCommands: n, Timeout: NoTimeout})
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("cmd-%05d", i)
	}
	for bucket := range 10 {
		for _, name := range names {
			for c := range 8 {
				d := time.Duration(1+c) * time.Millisecond
				run := func(context.Context) (int, error) { clock.Advance(d); return 0, nil }
				if _, err := Execute(context.Background(), g, Func(name, run, nil)); err != nil {
					b.Fatal(err)
				}
				clock.Advance(-d) // the calls of a bucket stay in it
			}
		}
		if bucket < 9 {
			clock.Advance(time.Second)
		}
	}
	return reg
}

// BenchmarkRegistrySnapshot is a registry snapshot of n commands whose
// every bucket holds calls (go test -run='^$' -bench=RegistrySnapshot
// ./command/): issue 24's snapshot row. In "static" nothing changes between
// snapshots; in "changed" every command gets one more call in its newest
// bucket before each snapshot (not timed), as in a busy stream tick.
func BenchmarkRegistrySnapshot(b *testing.B) {
	ok := func(context.Context) (int, error) { return 0, nil }
	for _, n := range []int{1000, 10000} {
		for _, changed := range []bool{false, true} {
			name := fmt.Sprintf("commands=%d/static", n)
			if changed {
				name = fmt.Sprintf("commands=%d/changed", n)
			}
			b.Run(name, func(b *testing.B) {
				reg := busyRegistry(b, n)
				g, _ := reg.Group("g")
				b.ReportAllocs()
				var cpu time.Duration
				for b.Loop() {
					if changed {
						b.StopTimer()
						for i := range n {
							if _, err := Execute(context.Background(), g, Func(fmt.Sprintf("cmd-%05d", i), ok, nil)); err != nil {
								b.Fatal(err)
							}
						}
						b.StartTimer()
					}
					start := cputime.Used(b)
					if s := reg.Snapshot(); len(s.Groups[0].Commands) != n {
						b.Fatalf("snapshot has %d commands, want %d", len(s.Groups[0].Commands), n)
					}
					cpu += cputime.Used(b) - start
				}
				b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
			})
		}
	}
}
