// Command scale prints every row of issue 24's table (what bulwark costs per command name, per
// group, per snapshot and per core) with its target and whether it is met:
//
//	go run ./cmd/scale           # from bench/: every row, about five minutes on a 2-core VM
//	go run ./cmd/scale -quick    # smaller counts and shorter runs
//
// Heap per name is measured after a forced GC, for names with one call (fresh) and for names
// with calls in every bucket of the window, their latencies spread over 1-8 ms (busy: four
// octaves of histogram bins), with no go-metrics bridge (package gmbridge: off by default). Times
// are medians of -rounds runs, as wall clock and as the process's CPU time (user+system, all
// threads: on a shared machine the wall clock also counts the time other processes held the
// cores). The snapshot, stream, scrape and per-call rows are the library's own benchmarks, run
// as test binaries in rounds (see benchRows). It prints a markdown table.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

func main() {
	quick := flag.Bool("quick", false, "smaller counts")
	rounds := flag.Int("rounds", 5, "runs per timed row (median)")
	idle := flag.Duration("idle", 30*time.Second, "CPU window of each idle row")
	idleOnly := flag.Bool("idle-only", false, "only the idle and httpguard rows")
	flag.Parse()
	names, groups := 2000, 1000
	if *quick {
		names, groups, *rounds = 500, 100, 3
	}
	fmt.Printf("| what | figure | target |\n|---|---|---|\n")
	if *idleOnly {
		idleRows(groups, *idle, *quick)
		hostRow(groups, *quick)
		return
	}
	for _, busy := range []bool{false, true} {
		perName := heapPerName(names, busy) / 1024
		kind := "fresh (one call)"
		if busy {
			kind = "busy (every bucket, 1-8 ms)"
		}
		fmt.Printf("| heap per command name, %s, %d names | %.1f KiB | %s |\n", kind, names, perName, target(perName <= 8, "≤ 8 KiB"))
	}
	few := median(*rounds, func() span { return create(names / 2) })
	many := median(*rounds, func() span { return create(names * 5) })
	growth := float64(many.cpu) / float64(few.cpu)
	fmt.Printf("| creating %d / %d names (one Execute each) | %v / %v: %.1f× the CPU for 10× the names | %s |\n",
		names/2, names*5, few, many, growth, target(growth <= 15, "linear (here: ≤ 15× for 10×; it was 22×)"))
	goroutines := idleGoroutines(groups)
	fmt.Printf("| idle registry, %d Thread groups: goroutines beyond the baseline | %d | %s |\n", groups, goroutines, sized(*quick, "1,000 groups", goroutines <= 50, "≤ 50"))
	idleRows(groups, *idle, *quick)
	hostRow(groups, *quick)
	benchRows(*rounds, *quick)
}

var logger = slog.New(slog.NewTextHandler(io.Discard, nil))

func heap() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc)
}

// fill creates n names in a new semaphore group on clock and calls each: once (1 ms), or, when
// busy, in each of the window's 10 buckets with latencies from 1 to 8 ms.
func fill(n int, busy bool) (*command.Registry, *metrics.ManualClock) {
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: logger})
	g, err := reg.NewGroup("g", command.GroupConfig{Strategy: command.Semaphore, MaxCommands: n, Timeout: command.NoTimeout})
	check(err)
	calls, buckets := 1, 1
	if busy {
		calls, buckets = 8, 10
	}
	for b := range buckets {
		for i := range n {
			for c := range calls {
				d := time.Duration(1+c) * time.Millisecond
				run := func(context.Context) (int, error) { clock.Advance(d); return 0, nil }
				_, err := command.Execute(context.Background(), g, command.Func(fmt.Sprintf("cmd-%05d", i), run, nil))
				check(err)
				clock.Advance(-d) // the calls of a bucket stay in it
			}
		}
		if b < buckets-1 {
			clock.Advance(time.Second)
		}
	}
	return reg, clock
}

// heapPerName returns the heap each of n names costs.
func heapPerName(n int, busy bool) float64 {
	before := heap()
	reg, _ := fill(n, busy)
	after := heap()
	runtime.KeepAlive(reg)
	check(reg.Close(context.Background()))
	return (after - before) / float64(n)
}

func create(n int) span {
	start := now()
	reg, _ := fill(n, false)
	d := start.to(now())
	check(reg.Close(context.Background()))
	return d
}

// span is a duration on the wall clock and in CPU time.
type span struct{ wall, cpu time.Duration }

func (s span) String() string {
	return fmt.Sprintf("%v wall, %v CPU", s.wall.Round(10*time.Microsecond), s.cpu.Round(10*time.Microsecond))
}

// instant is a reading of both clocks.
type instant struct {
	wall time.Time
	cpu  time.Duration
}

func now() instant {
	var u syscall.Rusage
	check(syscall.Getrusage(syscall.RUSAGE_SELF, &u))
	return instant{time.Now(), time.Duration(u.Utime.Nano() + u.Stime.Nano())}
}

func (i instant) to(j instant) span { return span{j.wall.Sub(i.wall), j.cpu - i.cpu} }

func idleGoroutines(n int) int {
	runtime.GC()
	base := runtime.NumGoroutine()
	reg := command.NewRegistry(command.RegistryConfig{Logger: logger})
	for i := range n {
		_, err := reg.NewGroup(fmt.Sprintf("g%04d", i), command.GroupConfig{})
		check(err)
	}
	time.Sleep(100 * time.Millisecond)
	extra := runtime.NumGoroutine() - base
	check(reg.Close(context.Background()))
	return extra
}

// median runs f rounds times and returns the median of each clock.
func median(rounds int, f func() span) span {
	walls, cpus := make([]time.Duration, rounds), make([]time.Duration, rounds)
	for i := range walls {
		s := f()
		walls[i], cpus[i] = s.wall, s.cpu
	}
	return span{middle(walls), middle(cpus)}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}
