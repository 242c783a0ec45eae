package main

import (
	"slices"
	"sync"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
)

// How a call went, as the load generator saw it.
const (
	outcomeOK       = "ok"        // the backend's answer
	outcomeFallback = "fallback"  // the fallback's answer
	outcomeError    = "error"     // the front answered 502: the call failed without a fallback
	outcomeNoAnswer = "no_answer" // the front did not answer (the generator's 5 s timeout, a broken connection)
)

// call is one request of the load generator.
type call struct {
	Route    string
	Start    time.Duration // the instant it was scheduled at, on the drill's clock
	Lag      time.Duration // from when it fell due to the moment it was sent: the generator's own delay
	Latency  time.Duration // from when it fell due to the end of the front's answer (Lag included)
	Outcome  string        // outcomeOK, outcomeFallback, ...
	Event    string        // the call's primary event (metrics.Event's names)
	Fallback string        // its fallback event, "" if no fallback was considered
}

// watched is a breaker the drill watched.
type watched struct {
	Name, Route string
	Initial     circuit.State // its state when the watch began
}

// transition is a transition of a watched breaker.
type transition struct {
	Route string
	circuit.Transition
}

// arrival is a request that arrived at the backend, filed under the
// instant its call was scheduled at (call.Start), so it counts in the
// phase of the call that sent it: a call scheduled just before the fault
// was injected can reach the backend just after.
type arrival struct {
	Route string
	At    time.Duration
}

// The instants of the script, indexes of drillLog.Marks. Phase i (warm,
// hold, after) runs from Marks[i] to Marks[i+1].
const (
	markStart  = iota // the load starts
	markInject        // the fault is injected
	markRemove        // the fault is removed
	markEnd           // the last request has been answered
	numMarks
)

// drillLog is everything a drill recorded, every instant one of the
// drill's clock (the registry's, so the breakers' transitions are on it
// too); the calls' Lag and Latency are durations on the system clock.
type drillLog struct {
	Marks       [numMarks]time.Duration
	Calls       []call
	Breakers    []watched
	Transitions []transition
	Arrivals    []arrival
}

// recorder collects a drillLog from the load generator, the backend and
// the breakers' observers. It is safe for concurrent use.
type recorder struct {
	mu  sync.Mutex
	log drillLog
}

// mark records at as the instant m (markStart, ...).
func (r *recorder) mark(m int, at time.Duration) {
	r.mu.Lock()
	r.log.Marks[m] = at
	r.mu.Unlock()
}

// call records c.
func (r *recorder) call(c call) {
	r.mu.Lock()
	r.log.Calls = append(r.log.Calls, c)
	r.mu.Unlock()
}

// arrival records a request of the call scheduled at the instant at
// arriving at the backend's route.
func (r *recorder) arrival(route string, at time.Duration) {
	r.mu.Lock()
	r.log.Arrivals = append(r.log.Arrivals, arrival{Route: route, At: at})
	r.mu.Unlock()
}

// watch records b (of route) and its transitions from now on, until the
// returned stop is called.
func (r *recorder) watch(route string, b *circuit.Breaker) (stop func()) {
	r.mu.Lock()
	r.log.Breakers = append(r.log.Breakers, watched{Name: b.Snapshot().Config.Name, Route: route, Initial: b.State()})
	r.mu.Unlock()
	return b.Observe(func(t circuit.Transition) {
		r.mu.Lock()
		r.log.Transitions = append(r.log.Transitions, transition{Route: route, Transition: t})
		r.mu.Unlock()
	})
}

// snapshot returns a copy of what r has recorded.
func (r *recorder) snapshot() drillLog {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.log
	l.Calls = slices.Clone(l.Calls)
	l.Breakers = slices.Clone(l.Breakers)
	l.Transitions = slices.Clone(l.Transitions)
	l.Arrivals = slices.Clone(l.Arrivals)
	return l
}
