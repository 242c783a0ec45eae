package dashboard

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/internal/cputime"
	"github.com/bulwark-go/bulwark/metrics"
)

// bigSnapshot has 5 groups of 10 commands, each command with three breaker
// transitions.
func bigSnapshot() command.Snapshot {
	base := sampleSnapshot()
	users := base.Groups[1]
	var snap command.Snapshot
	for g := range 5 {
		grp := users
		grp.Name = fmt.Sprintf("group%d", g)
		grp.Commands = nil
		for c := range 10 {
			cmd := users.Commands[0] // the one with transitions
			cmd.Name = fmt.Sprintf("Command%02d", c)
			grp.Commands = append(grp.Commands, cmd)
		}
		snap.Groups = append(snap.Groups, grp)
	}
	return snap
}

// BenchmarkEncode measures one frame of 50 commands and 5 pools: the work
// a hub does per tick, whatever the number of clients.
func BenchmarkEncode(b *testing.B) {
	snap := bigSnapshot()
	var e encoder
	data, err := e.encode(snap, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if data, err = e.encode(snap, len(data)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTick is one stream tick of a registry of 5,000 commands whose
// every bucket holds calls (latencies 1-8 ms): the snapshot and its
// encoding, what a hub does per interval (go test -run='^$' -bench=Tick
// ./dashboard/). Every command gets one more call before each tick (not
// timed), so no snapshot can be reused. cpu-ms/op is the process's CPU
// time per tick, which a shared machine's load does not inflate.
func BenchmarkTick(b *testing.B) {
	const n = 5000
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	b.Cleanup(func() {
		if err := reg.Close(context.Background()); err != nil {
			b.Error(err)
		}
	})
	g, err := reg.NewGroup("g", command.GroupConfig{Strategy: command.Semaphore, MaxCommands: n, Timeout: command.NoTimeout})
	if err != nil {
		b.Fatal(err)
	}
	call := func(name string, d time.Duration) {
		run := func(context.Context) (int, error) { clock.Advance(d); return 0, nil }
		if _, err := command.Execute(context.Background(), g, command.Func(name, run, nil)); err != nil {
			b.Fatal(err)
		}
		clock.Advance(-d) // the calls of a bucket stay in it
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("cmd-%05d", i)
	}
	for bucket := range 10 {
		for _, name := range names {
			for c := range 8 {
				call(name, time.Duration(1+c)*time.Millisecond)
			}
		}
		if bucket < 9 {
			clock.Advance(time.Second)
		}
	}
	var e encoder
	size := 0
	var cpu time.Duration
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for _, name := range names {
			call(name, 3*time.Millisecond)
		}
		b.StartTimer()
		start := cputime.Used(b)
		data, err := e.encode(reg.Snapshot(), size)
		if err != nil {
			b.Fatal(err)
		}
		cpu += cputime.Used(b) - start
		size = len(data)
	}
	b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
	b.ReportMetric(float64(size)/1e6, "MB/frame")
}
