package command

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkCreateNames creates a group's first n command names, one
// Execute each (go test -run='^$' -bench=CreateNames ./command/). Creation
// is linear when the 10,000-name case costs about ten times the 1,000-name
// one per op; a copy-on-write table made it about 23 times.
func BenchmarkCreateNames(b *testing.B) {
	ok := func(context.Context) (int, error) { return 1, nil }
	for _, n := range []int{1000, 10000} {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("cmd-%05d", i)
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				reg := NewRegistry(RegistryConfig{Logger: discardLogger})
				g, err := reg.NewGroup("g", GroupConfig{Strategy: Semaphore, MaxCommands: n, Timeout: NoTimeout})
				if err != nil {
					b.Fatal(err)
				}
				for _, name := range names {
					if _, err := Execute(context.Background(), g, Func(name, ok, nil)); err != nil {
						b.Fatal(err)
					}
				}
				if err := reg.Close(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNameIndexAdd adds n names to a group's name index alone, without
// the breaker, window and go-metrics gauges each new command also builds: the
// part of creation BenchmarkCreateNames shows was quadratic.
func BenchmarkNameIndexAdd(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		cmds := make([]*commandState, n)
		for i := range cmds {
			cmds[i] = &commandState{name: fmt.Sprintf("cmd-%05d", i)}
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				x := newNameIndex()
				for _, c := range cmds {
					if x.get(c.name) == nil {
						x.add(c)
					}
				}
			}
		})
	}
}
