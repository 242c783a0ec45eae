package metrics_test

import (
	"fmt"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

func ExampleRolling() {
	var clock metrics.ManualClock
	r, err := metrics.NewRolling(metrics.Window{Length: time.Second, Buckets: 10}, metrics.CountsAndLatencies)
	if err != nil {
		panic(err)
	}
	for i := range 100 {
		now := clock.Now()
		if i%10 == 0 {
			r.Add(now, metrics.Failure)
		} else {
			r.Add(now, metrics.Success)
		}
		r.ObserveTotal(now, time.Duration(i+1)*time.Millisecond)
		clock.Advance(5 * time.Millisecond)
	}
	s := r.Snapshot(clock.Now())
	fmt.Println("success:", s.Counts[metrics.Success], "failure:", s.Counts[metrics.Failure])
	fmt.Println("p50 within 2%:", s.Total.Percentiles[2] > 49*time.Millisecond && s.Total.Percentiles[2] < 51*time.Millisecond)

	clock.Advance(2 * time.Second) // an idle gap longer than the window
	fmt.Println("after idle gap:", r.Counts(clock.Now())[metrics.Success])
	// Output:
	// success: 90 failure: 10
	// p50 within 2%: true
	// after idle gap: 0
}

// One call, recorded with one bucket lookup: a timeout served by a fallback,
// whose Run never returned to the caller (so no run latency).
func ExampleRolling_Record() {
	r, err := metrics.NewRolling(metrics.DefaultWindow(), metrics.CountsAndLatencies)
	if err != nil {
		panic(err)
	}
	now := 3 * time.Second
	events := metrics.SetOf(metrics.Timeout, metrics.FallbackSuccess)
	r.Record(now, events, metrics.NoLatency, 250*time.Millisecond)
	s := r.Snapshot(now)
	fmt.Println(events, s.Counts[metrics.Timeout], s.Run.Count, s.Total.Count)
	// Output:
	// TIMEOUT|FALLBACK_SUCCESS 1 0 1
}
