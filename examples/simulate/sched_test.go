package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/bulwark-go/bulwark/metrics"
)

// TestSchedulerOrder checks that events run by (instant, scheduling),
// whether they wait in a lane or in the heap.
func TestSchedulerOrder(t *testing.T) {
	var got []string
	var s *scheduler
	s = newScheduler(new(metrics.ManualClock), func(kind uint8, hop int, _ *request) {
		got = append(got, string(rune('a'+kind))+"@"+s.now().String())
	}, 0, 5*time.Millisecond)
	s.at(0, func() {
		got = append(got, "start")
		s.post(5*time.Millisecond, 0, 0, nil) // lane 5ms: a
		s.post(7*time.Millisecond, 1, 0, nil) // heap: b
		s.post(5*time.Millisecond, 2, 0, nil) // lane 5ms, after a: c
		s.at(3*time.Millisecond, func() {     // heap
			s.post(8*time.Millisecond, 3, 0, nil)  // lane 5ms: d
			s.post(3*time.Millisecond, 4, 0, nil)  // lane 0: e, after this event
			s.post(20*time.Millisecond, 5, 0, nil) // past the end: never
		})
	})
	s.run(10 * time.Millisecond)
	assert.Equal(t, []string{"start", "e@3ms", "a@5ms", "c@5ms", "b@7ms", "d@8ms"}, got)
}

// TestSchedulerThreads checks that threads sleep in virtual time one at a
// time, and that stop ends the parked ones (park then returns false, and
// goleak finds no goroutine left).
func TestSchedulerThreads(t *testing.T) {
	s := newScheduler(new(metrics.ManualClock), nil)
	var log []string
	var ended []bool
	for i, d := range []time.Duration{3 * time.Millisecond, 2 * time.Millisecond} {
		s.at(0, func() {
			s.spawn(func(th *thread) {
				for th.sleep(d) {
					log = append(log, string(rune('A'+i))+"@"+s.now().String())
				}
				ended = append(ended, s.now() < 7*time.Millisecond)
			})
		})
	}
	s.run(7 * time.Millisecond)
	assert.Equal(t, []string{"B@2ms", "A@3ms", "B@4ms", "A@6ms", "B@6ms"}, log)
	assert.Equal(t, []bool{true, true}, ended, "both ended by stop, at the last instant processed")
	assert.Empty(t, s.threads)
}
