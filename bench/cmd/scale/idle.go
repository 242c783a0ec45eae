package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/bulwark-go/bulwark/alert"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/httpguard"
)

// idleRows prints what n idle groups cost: goroutines beyond the process's baseline and the
// CPU the process spends over window while nothing calls, for groups never called and for
// groups called once (then idle), without alerts and with one alert Watcher for all of them. The CPU figure is
// the process's CPU time (getrusage) over window with the groups, minus the same reading
// without them taken just before, as a share of one core.
func idleRows(n int, window time.Duration, quick bool) {
	base := idleCPU(window)
	fmt.Printf("| idle process baseline (no registry), CPU over %v | %.2f%% of a core | |\n", window, 100*base)
	for _, row := range []struct {
		kind          string
		strategy      command.Strategy
		calls, alerts bool
		wait          time.Duration
	}{
		{"Thread groups never called, alerts off", command.Thread, false, false, settle},
		{"Thread groups never called, alerts on", command.Thread, false, true, settle},
		{"Thread groups called once, alerts on, from 3 s after the calls", command.Thread, true, true, settle},
		{"Thread groups called once, alerts on, idle longer than the 10 s window", command.Thread, true, true, settle + window10s},
		{"Semaphore groups called once, alerts on, idle longer than the 10 s window", command.Semaphore, true, true, settle + window10s},
	} {
		goroutines, cpu := idleGroups(n, row.strategy, row.calls, row.alerts, row.wait, window)
		fmt.Printf("| idle registry, %d %s: goroutines beyond the baseline, CPU beyond it | %d, %.2f%% of a core | %s |\n",
			n, row.kind, goroutines, 100*(cpu-base), sized(quick, "1,000 groups", goroutines <= 50 && cpu-base <= 0.005, "≤ 50, ≤ 0.5% of a core"))
	}
}

// window10s is the default metrics window: a group called once is quiet (command.Group.Quiet)
// once it has passed.
const window10s = 10 * time.Second

// settle is how long the idle rows wait after the last call before they count: longer than
// ants' purge of idle workers (a worker left idle exits after 1-2 s).
const settle = 3 * time.Second

// idleCPU returns the share of a core the process spends over window.
func idleCPU(window time.Duration) float64 {
	start := now()
	time.Sleep(window)
	return float64(start.to(now()).cpu) / float64(window)
}

// idleGroups creates n groups, watched by one alert Watcher if alerts, calls each once if
// calls, waits wait and then returns the goroutines beyond the count before and the process's
// CPU share over window.
func idleGroups(n int, strategy command.Strategy, calls, alerts bool, wait, window time.Duration) (int, float64) {
	runtime.GC()
	base := runtime.NumGoroutine()
	cfg := command.GroupConfig{Strategy: strategy}
	if alerts {
		w, err := alert.New(alert.Config{})
		check(err)
		cfg.Alerts = w
	}
	reg := command.NewRegistry(command.RegistryConfig{Logger: logger})
	defer func() { check(reg.Close(context.Background())) }()
	for i := range n {
		g, err := reg.NewGroup(fmt.Sprintf("g%05d", i), cfg)
		check(err)
		if calls {
			_, err := command.Execute(context.Background(), g, command.Func("call", func(context.Context) (int, error) { return 0, nil }, nil))
			check(err)
		}
	}
	time.Sleep(wait)
	goroutines := runtime.NumGoroutine() - base
	return goroutines, idleCPU(window)
}

// hostRow prints what an httpguard Transport costs with n hosts each sent one request: the
// goroutines beyond the baseline and the heap beyond it (after a forced GC), right after the
// requests and once idle workers have exited (settle later).
func hostRow(n int, quick bool) {
	runtime.GC()
	baseG, baseHeap := runtime.NumGoroutine(), heap()
	reg := command.NewRegistry(command.RegistryConfig{Logger: logger})
	defer func() { check(reg.Close(context.Background())) }()
	t, err := httpguard.NewTransport(reg, httpguard.Config{Base: okTransport{}, MaxHosts: n})
	check(err)
	client := &http.Client{Transport: t}
	for i := range n {
		resp, err := client.Get(fmt.Sprintf("http://host%05d.example/", i))
		check(err)
		check(resp.Body.Close())
	}
	g, h := runtime.NumGoroutine()-baseG, (heap()-baseHeap)/(1<<20)
	time.Sleep(settle)
	fmt.Printf("| httpguard, %d hosts, one GET each: goroutines and heap beyond the baseline | %d, %.1f MiB at once; %d, %.1f MiB %v later | %s |\n",
		n, g, h, runtime.NumGoroutine()-baseG, (heap()-baseHeap)/(1<<20), settle,
		sized(quick, "1,000 hosts", g <= 50 && h <= 20, "≤ 50 goroutines, ≤ 20 MiB"))
}

// okTransport answers every request with an empty 200, without a network.
type okTransport struct{}

func (okTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}
