package main

import (
	"maps"
	"slices"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// scheduler runs a discrete-event simulation on a virtual clock whose actors
// include threads: goroutines that block in virtual time (they sleep, or
// wait for an answer), as a server's threads do, so that real blocking code,
// such as command.Execute with a Run that waits for another service, can
// take part. Exactly one goroutine runs at a time: the scheduler's, which
// processes the events in order of (instant, scheduling), or the one thread
// it resumed, until that thread parks or ends. So a run is deterministic,
// and the simulation's state needs no lock (the channel hand-offs order
// every access).
//
// A thread never resumes another thread itself: it schedules an event that
// does (wakeAt), then parks. Events are a function (at), a thread to resume
// (wakeAt), or a simulation event handed to handle (post). An event whose
// delay from now is one of the lanes' goes to that lane, a FIFO (events of
// one delay come in the order of their instants), the others to a heap; the
// next event is the earliest of the heap's top and the lanes' heads, by
// (instant, scheduling), so the lanes change no order, only the cost: a
// heap of every pending timeout, most of them void, is what a run would
// spend its time on.
type scheduler struct {
	clock    *metrics.ManualClock
	q        eventQueue
	lanes    []lane
	handle   func(kind uint8, hop int, r *request) // the simulation's events (post)
	yield    chan struct{}                         // the running thread hands control back
	threads  map[int]*thread                       // live threads by creation number
	created  int
	stopping bool // stop is ending the threads: no more events, parks return at once
}

// thread is a goroutine of the simulation that can park in virtual time.
type thread struct {
	s    *scheduler
	id   int
	wake chan struct{}
}

// lane is a FIFO of the events scheduled d after their scheduling.
type lane struct {
	d    time.Duration
	ev   []event
	head int // ev[head:] are pending
}

// newScheduler returns a scheduler on clock whose simulation events go to
// handle, with a lane for each delay in lanes.
func newScheduler(clock *metrics.ManualClock, handle func(kind uint8, hop int, r *request), lanes ...time.Duration) *scheduler {
	s := &scheduler{clock: clock, handle: handle, yield: make(chan struct{}), threads: map[int]*thread{}}
	for _, d := range lanes {
		if !slices.ContainsFunc(s.lanes, func(l lane) bool { return l.d == d }) {
			s.lanes = append(s.lanes, lane{d: d})
		}
	}
	return s
}

// now returns the virtual instant.
func (s *scheduler) now() time.Duration { return s.clock.Now() }

// at schedules f to run on the scheduler's goroutine at instant t, after
// the events already scheduled for t. Once stop has begun it does nothing,
// as do wakeAt and post.
func (s *scheduler) at(t time.Duration, f func()) { s.push(event{at: t, f: f}) }

// wakeAt schedules the resumption of th at instant t.
func (s *scheduler) wakeAt(t time.Duration, th *thread) { s.push(event{at: t, th: th}) }

// post schedules the simulation's event (kind, hop, r) at instant t: handle
// gets it then.
func (s *scheduler) post(t time.Duration, kind uint8, hop int, r *request) {
	s.push(event{at: t, kind: kind, hop: hop, r: r})
}

func (s *scheduler) push(e event) {
	if s.stopping {
		return
	}
	s.q.seq++
	e.seq = s.q.seq
	d := e.at - s.now()
	for i := range s.lanes {
		if l := &s.lanes[i]; l.d == d {
			l.ev = append(l.ev, e)
			return
		}
	}
	s.q.push(e)
}

// next removes and returns the earliest pending event; false if none.
func (s *scheduler) next() (event, bool) {
	var best *event
	from := -1 // the lane of best; -1: the heap
	if len(s.q.ev) > 0 {
		best = s.q.ev[0]
	}
	for i := range s.lanes {
		l := &s.lanes[i]
		if l.head == len(l.ev) {
			continue
		}
		if e := &l.ev[l.head]; best == nil || e.at < best.at || e.at == best.at && e.seq < best.seq {
			best, from = e, i
		}
	}
	switch {
	case best == nil:
		return event{}, false
	case from < 0:
		return s.q.pop(), true
	}
	l := &s.lanes[from]
	e := *best
	l.ev[l.head] = event{}
	l.head++
	if l.head == len(l.ev) {
		l.ev, l.head = l.ev[:0], 0
	} else if l.head >= 1024 && 2*l.head >= len(l.ev) {
		n := copy(l.ev, l.ev[l.head:])
		clear(l.ev[n:])
		l.ev, l.head = l.ev[:n], 0
	}
	return e, true
}

// run processes the events before end, moving the clock to each, then
// stops the threads (see stop).
func (s *scheduler) run(end time.Duration) {
	for {
		e, ok := s.next()
		if !ok || e.at >= end {
			break
		}
		s.clock.Set(e.at)
		switch {
		case e.th != nil:
			s.resume(e.th)
		case e.f != nil:
			e.f()
		default:
			s.handle(e.kind, e.hop, e.r)
		}
	}
	s.stop()
}

// spawn runs f on a new thread now and returns when it parks or ends. It
// must be called on the scheduler's goroutine (from an event).
func (s *scheduler) spawn(f func(th *thread)) {
	s.created++
	th := &thread{s: s, id: s.created, wake: make(chan struct{})}
	s.threads[th.id] = th
	go func() {
		f(th)
		delete(s.threads, th.id)
		s.yield <- struct{}{}
	}()
	<-s.yield
}

// resume runs the parked thread th until it parks again or ends. It must be
// called on the scheduler's goroutine (from an event).
func (s *scheduler) resume(th *thread) {
	th.wake <- struct{}{}
	<-s.yield
}

// stop ends the run: it resumes every parked thread, in the order they were
// created, and lets it run to its end, with every park returning false at
// once and no event scheduled any more. Threads must treat a false park as
// "give up now" (an error for whatever they were waiting for).
func (s *scheduler) stop() {
	s.stopping = true
	for _, id := range slices.Sorted(maps.Keys(s.threads)) {
		if th, ok := s.threads[id]; ok {
			s.resume(th)
		}
	}
}

// park hands control back to the scheduler until an event resumes th. It
// returns false, at once if need be, when the run is over.
func (th *thread) park() bool {
	if th.s.stopping {
		return false
	}
	th.s.yield <- struct{}{}
	<-th.wake
	return !th.s.stopping
}

// sleep parks th for d of virtual time; false if the run ended meanwhile.
func (th *thread) sleep(d time.Duration) bool {
	th.s.wakeAt(th.s.now()+d, th)
	return th.park()
}

// event is one scheduled event: f, or th to resume, or else the
// simulation's (kind, hop, r).
type event struct {
	at   time.Duration
	seq  uint64 // breaks ties in the order of scheduling: determinism
	f    func()
	th   *thread
	kind uint8
	hop  int
	r    *request
}

// eventQueue is a binary min-heap of events by (at, seq). It holds
// pointers, recycled through free, so that moving an event moves a word.
// seq also numbers the lanes' events (scheduler.push).
type eventQueue struct {
	ev   []*event
	free []*event
	seq  uint64
}

func (q *eventQueue) less(i, j int) bool {
	a, b := q.ev[i], q.ev[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}

// push adds e, whose seq is set.
func (q *eventQueue) push(e event) {
	var p *event
	if n := len(q.free); n > 0 {
		p, q.free = q.free[n-1], q.free[:n-1]
	} else {
		p = new(event)
	}
	*p = e
	q.ev = append(q.ev, p)
	for i := len(q.ev) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			break
		}
		q.ev[i], q.ev[parent] = q.ev[parent], q.ev[i]
		i = parent
	}
}

// pop removes the earliest event and returns a copy of it.
func (q *eventQueue) pop() event {
	top := q.ev[0]
	last := len(q.ev) - 1
	q.ev[0] = q.ev[last]
	q.ev[last] = nil
	q.ev = q.ev[:last]
	for i := 0; ; {
		small, l, r := i, 2*i+1, 2*i+2
		if l < last && q.less(l, small) {
			small = l
		}
		if r < last && q.less(r, small) {
			small = r
		}
		if small == i {
			break
		}
		q.ev[i], q.ev[small] = q.ev[small], q.ev[i]
		i = small
	}
	e := *top
	*top = event{}
	q.free = append(q.free, top)
	return e
}
