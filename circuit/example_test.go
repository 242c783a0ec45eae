package circuit_test

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/metrics"
)

func ExampleNew() {
	b, err := circuit.New(circuit.Config{
		Name:         "users-db",
		Window:       metrics.Window{Length: 10 * time.Second, Buckets: 10},
		FailureRatio: 0.25,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	c := b.Config() // the effective configuration, defaults applied
	fmt.Println(b.State(), c.MinRequests, c.FailureRatio, c.OpenDuration, c.HalfOpenSuccesses)

	_, err = circuit.New(circuit.Config{FailureRatio: 1.5})
	fmt.Println(errors.Is(err, circuit.ErrInvalidConfig), err)
	// Output:
	// closed 20 0.25 5s 3
	// true circuit: invalid config: FailureRatio 1.5 must be in (0, 1]
}

func ExampleBreaker_Allow() {
	clock := new(metrics.ManualClock) // virtual time: the breaker never sleeps
	b, _ := circuit.New(circuit.Config{
		Name:         "users-db",
		MinRequests:  4,
		OpenDuration: time.Second,
		Clock:        clock,
		Logger:       slog.New(slog.DiscardHandler),
		OnTransition: func(t circuit.Transition) {
			fmt.Printf("%v: %v -> %v (%v)\n", t.At, t.From, t.To, t.Reason)
		},
	})
	call := func(fail bool) {
		p, err := b.Allow()
		if err != nil {
			fmt.Println("refused:", err) // errors.Is(err, circuit.ErrOpen)
			return
		}
		if fail {
			p.Record(metrics.Failure, 300*time.Millisecond)
		} else {
			p.Record(metrics.Success, 8*time.Millisecond)
		}
	}
	for range 4 {
		call(true) // the dependency is down
	}
	call(false)
	clock.Advance(time.Second)
	for range 3 {
		call(false) // it is back: three probes close the breaker
	}
	// Output:
	// 0s: closed -> open (error_ratio)
	// refused: circuit: open
	// 1s: open -> half-open (open_elapsed)
	// 1s: half-open -> closed (probes_succeeded)
}

func ExampleBreaker_SetMode() {
	b, _ := circuit.New(circuit.Config{
		Clock:  new(metrics.ManualClock),
		Logger: slog.New(slog.DiscardHandler),
		OnTransition: func(t circuit.Transition) {
			fmt.Println(t.From, "->", t.To, t.Reason)
		},
	})
	b.SetMode(circuit.ForcedOpen) // take the dependency out by hand
	_, err := b.Allow()
	fmt.Println(err, errors.Is(err, circuit.ErrOpen))
	b.SetMode(circuit.Normal)
	fmt.Println(b.Snapshot().Mode, b.State())
	// Output:
	// closed -> open forced
	// circuit: open: forced open true
	// open -> closed forced
	// normal closed
}

func ExampleBreaker_Snapshot() {
	clock := new(metrics.ManualClock)
	b, _ := circuit.New(circuit.Config{
		MinRequests:  2,
		OpenDuration: 2 * time.Second,
		Clock:        clock,
		Logger:       slog.New(slog.DiscardHandler),
	})
	for _, o := range []metrics.Event{metrics.Success, metrics.Timeout} {
		p, _ := b.Allow()
		p.Record(o, time.Second)
	}
	clock.Advance(500 * time.Millisecond)
	s := b.Snapshot()
	last := s.Transitions[len(s.Transitions)-1] // why it is open
	fmt.Println(s.State, last.Reason, s.Since, s.RetryAfter, s.Health.Requests, s.Health.ErrorRatio)
	// Output: open error_ratio 500ms 1.5s 2 0.5
}

func ExampleConfig_observeOnly() {
	// Roll a breaker out in observe-only mode first: it reports what it
	// would do, and refuses nothing.
	clock := new(metrics.ManualClock)
	b, _ := circuit.New(circuit.Config{
		MinRequests: 2, Mode: circuit.ObserveOnly, Clock: clock, Logger: slog.New(slog.DiscardHandler),
		OnTransition: func(t circuit.Transition) { fmt.Println("would go", t.To, "because of", t.Reason) },
	})
	refused := 0
	for range 10 {
		p, err := b.Allow()
		if err != nil {
			refused++
			continue
		}
		p.Record(metrics.Failure, time.Millisecond)
	}
	fmt.Println("state:", b.State(), "refused:", refused)
	// Output:
	// would go open because of error_ratio
	// state: open refused: 0
}
