package isolation

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Job states. A job is owned by its caller and by the worker (or queue flush) that takes it;
// the state word decides which of the two recycles it, and who owns what the work produced:
//
//	pending ──worker──► started ──worker──► returned ──worker──► finished   (caller reads err, then recycles)
//	   │                   │
//	   └──caller──► abandoned ◄──caller──┘     (worker calls orphaned, then recycles when it gets there)
//	pending ──worker or flush──► finished       (dropped: err says why, work never ran)
//
// The side whose CompareAndSwap fails learns that the other side has gone, and from then on
// owns the job alone. returned is the worker's word that the work is over and its result the
// caller's: a caller whose context ends then waits for the result instead of leaving.
const (
	jobPending int32 = iota
	jobStarted
	jobReturned
	jobFinished
	jobAbandoned
)

// job is one Pool call, recycled through a sync.Pool.
type job struct {
	ctx      context.Context
	work     func(context.Context)
	orphaned func()        // called by the worker after work if the caller left (ExecuteOwned); may be nil
	err      error         // written by the worker before jobFinished, read by the caller after done
	done     chan struct{} // signalled once on jobFinished, and by the watch at the deadline: capacity 2; empty when recycled
	task     func()        // serve(this job), bound once so that submitting it allocates nothing
	state    atomic.Int32

	// The job's places in the Pool's queue (links[queueList], with queued: guarded by
	// queue.mu) and in its watch (links[watchList], with due and watched: guarded by
	// watch.mu). due is the deadline, a deadline.Now reading.
	links   [2]link
	due     time.Duration
	queued  bool
	watched bool
}

// link is a job's place in one of the intrusive doubly linked lists of jobs.
type link struct{ prev, next *job }

// The lists a job can be on, each threaded through a link of the job's own (job.links).
const (
	queueList = iota // the Pool's queue
	watchList        // the Pool's watch
)

// jobList is the ends of one such list. Its methods take the list's index in job.links (a
// constant, so that they inline to plain field accesses).
type jobList struct{ head, tail *job }

// insertAfter links j after at, or first when at is nil, on list.
func (l *jobList) insertAfter(j, at *job, list int) {
	jl := &j.links[list]
	jl.prev = at
	if at == nil {
		jl.next, l.head = l.head, j
	} else {
		jl.next, at.links[list].next = at.links[list].next, j
	}
	if jl.next == nil {
		l.tail = j
	} else {
		jl.next.links[list].prev = j
	}
}

// unlink takes j, which is on list l, off it.
func (l *jobList) unlink(j *job, list int) {
	jl := &j.links[list]
	if jl.prev == nil {
		l.head = jl.next
	} else {
		jl.prev.links[list].next = jl.next
	}
	if jl.next == nil {
		l.tail = jl.prev
	} else {
		jl.next.links[list].prev = jl.prev
	}
	*jl = link{}
}

// queue is the bounded FIFO of calls waiting for a worker: an intrusive doubly linked list, so
// a caller that gives up unlinks its job in O(1) and the queue never holds dead entries.
type queue struct {
	mu       sync.Mutex
	jobList       // guarded by mu
	capacity int  // guarded by mu
	closed   bool // guarded by mu

	// n is the length. It changes only under mu but is read without it: workers read it after
	// releasing their slot, and Execute's push-then-acquire pairs with that read (see
	// Pool.serve).
	n atomic.Int64
}

// push appends j. It returns ErrRejected when the queue is full and ErrClosed when it is closed.
func (q *queue) push(j *job) error {
	q.mu.Lock()
	switch {
	case q.closed:
		q.mu.Unlock()
		return ErrClosed
	case int(q.n.Load()) >= q.capacity:
		q.mu.Unlock()
		return ErrRejected
	}
	q.insertAfter(j, q.tail, queueList)
	j.queued = true
	q.n.Add(1)
	q.mu.Unlock()
	return nil
}

// pop removes and returns the oldest job, or nil when the queue is empty.
func (q *queue) pop() *job {
	if q.n.Load() == 0 {
		return nil
	}
	q.mu.Lock()
	j := q.head
	if j != nil {
		q.take(j)
	}
	q.mu.Unlock()
	return j
}

// remove unlinks j if it is still queued and reports whether it was.
func (q *queue) remove(j *job) bool {
	q.mu.Lock()
	ok := j.queued
	if ok {
		q.take(j)
	}
	q.mu.Unlock()
	return ok
}

// take removes j from the queue; q.mu must be held and j queued.
func (q *queue) take(j *job) {
	q.unlink(j, queueList)
	j.queued = false
	q.n.Add(-1)
}

// setCapacity changes the bound for later pushes; jobs already queued stay.
func (q *queue) setCapacity(n int) {
	q.mu.Lock()
	q.capacity = n
	q.mu.Unlock()
}

func (q *queue) getCapacity() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.capacity
}

// close refuses later pushes.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}

// takeAll empties the queue and returns its jobs, oldest first, linked through links[queueList].
func (q *queue) takeAll() *job {
	q.mu.Lock()
	head := q.head
	for j := head; j != nil; j = j.links[queueList].next {
		j.queued = false
	}
	q.head, q.tail = nil, nil
	q.n.Store(0)
	q.mu.Unlock()
	return head
}
