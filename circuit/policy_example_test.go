package circuit_test

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/metrics"
)

// quiet returns a breaker config on clock that prints its transitions.
func quiet(clock *metrics.ManualClock) circuit.Config {
	return circuit.Config{
		Name:              "users-db",
		MinRequests:       4,
		OpenDuration:      time.Second,
		HalfOpenSuccesses: 2,
		Clock:             clock,
		Logger:            slog.New(slog.DiscardHandler),
		OnTransition: func(t circuit.Transition) {
			fmt.Printf("%v: %v -> %v (%v)\n", t.At, t.From, t.To, t.Reason)
		},
	}
}

// call makes one call with outcome o; a refused call prints why.
func call(b *circuit.Breaker, o metrics.Event) {
	p, err := b.Allow()
	if err != nil {
		fmt.Println("refused:", err)
		return
	}
	p.Record(o, time.Millisecond)
}

// HalfOpenFailures: 2 keeps one probe that fails at the moment of recovery
// from reopening the breaker for another open duration.
func ExampleConfig_halfOpenFailures() {
	clock := new(metrics.ManualClock)
	cfg := quiet(clock)
	cfg.HalfOpenFailures = 2
	b, _ := circuit.New(cfg)
	for range 4 {
		call(b, metrics.Failure)
	}
	clock.Advance(time.Second)
	call(b, metrics.Failure) // the first probe fails: still half-open
	call(b, metrics.Success)
	call(b, metrics.Success)
	// Output:
	// 0s: closed -> open (error_ratio)
	// 1s: open -> half-open (open_elapsed)
	// 1s: half-open -> closed (probes_succeeded)
}

// A doubling ramp admits 1 % of the calls right after closing and doubles
// the share every RampDoubling (3 s here): 100 % after 21 s.
func ExampleConfig_rampDoubling() {
	clock := new(metrics.ManualClock)
	cfg := quiet(clock)
	cfg.OnTransition = nil
	cfg.RampDuration = 30 * time.Second
	cfg.RampDoubling = 3 * time.Second
	b, _ := circuit.New(cfg)
	b.SetMode(circuit.ForcedOpen)
	b.SetMode(circuit.Normal) // leaving forced-open starts a ramp-up
	for range 8 {
		fmt.Printf("%v %.2f\n", clock.Now(), b.Snapshot().RampShare)
		clock.Advance(3 * time.Second)
	}
	// Output:
	// 0s 0.01
	// 3s 0.02
	// 6s 0.04
	// 9s 0.08
	// 12s 0.16
	// 15s 0.32
	// 18s 0.64
	// 21s 1.00
}

// RampFunc gives the ramp-up schedule as a function: here a quarter of the
// calls for 10 s, then all of them.
func ExampleConfig_rampFunc() {
	clock := new(metrics.ManualClock)
	cfg := quiet(clock)
	cfg.OnTransition = nil
	cfg.RampDuration = time.Minute
	cfg.RampFunc = func(elapsed time.Duration) float64 {
		if elapsed < 10*time.Second {
			return 0.25
		}
		return 1
	}
	b, _ := circuit.New(cfg)
	b.SetMode(circuit.ForcedOpen)
	b.SetMode(circuit.Normal)
	admitted := 0
	for range 100 {
		if p, err := b.Allow(); err == nil {
			admitted++
			p.Record(metrics.Success, time.Millisecond)
		}
	}
	fmt.Println(admitted, "of 100 admitted")
	clock.Advance(10 * time.Second)
	fmt.Println(b.Snapshot().RampShare)
	// Output:
	// 25 of 100 admitted
	// 1
}

// WarmUp, called from a deploy hook, keeps the failures of cold instances
// from tripping the breaker.
func ExampleBreaker_WarmUp() {
	clock := new(metrics.ManualClock)
	b, _ := circuit.New(quiet(clock))
	if err := b.WarmUp(time.Minute); err != nil {
		fmt.Println(err)
		return
	}
	for range 10 {
		call(b, metrics.Failure) // not counted
	}
	s := b.Snapshot()
	fmt.Println(s.State, s.WarmUpLeft)
	clock.Advance(time.Minute)
	for range 4 {
		call(b, metrics.Failure)
	}
	// Output:
	// closed 1m0s
	// 1m0s: closed -> open (error_ratio)
}
