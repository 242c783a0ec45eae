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

	// Queue links and membership, guarded by queue.mu.
	prev, next *job
	queued     bool

	// Deadline (a deadline.Now reading), links and membership of the Pool's watch, guarded by
	// watch.mu.
	due          time.Duration
	wprev, wnext *job
	watched      bool
}

// queue is the bounded FIFO of calls waiting for a worker: an intrusive doubly linked list, so
// a caller that gives up unlinks its job in O(1) and the queue never holds dead entries.
type queue struct {
	mu         sync.Mutex
	head, tail *job
	capacity   int  // guarded by mu
	closed     bool // guarded by mu

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
	j.prev, j.next, j.queued = q.tail, nil, true
	if q.tail == nil {
		q.head = j
	} else {
		q.tail.next = j
	}
	q.tail = j
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
		q.unlink(j)
	}
	q.mu.Unlock()
	return j
}

// remove unlinks j if it is still queued and reports whether it was.
func (q *queue) remove(j *job) bool {
	q.mu.Lock()
	ok := j.queued
	if ok {
		q.unlink(j)
	}
	q.mu.Unlock()
	return ok
}

// unlink removes j from the list; q.mu must be held and j queued.
func (q *queue) unlink(j *job) {
	if j.prev == nil {
		q.head = j.next
	} else {
		j.prev.next = j.next
	}
	if j.next == nil {
		q.tail = j.prev
	} else {
		j.next.prev = j.prev
	}
	j.prev, j.next, j.queued = nil, nil, false
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

// takeAll empties the queue and returns its jobs, oldest first, linked through next.
func (q *queue) takeAll() *job {
	q.mu.Lock()
	head := q.head
	for j := head; j != nil; j = j.next {
		j.queued = false
	}
	q.head, q.tail = nil, nil
	q.n.Store(0)
	q.mu.Unlock()
	return head
}
