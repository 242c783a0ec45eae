package isolation

import (
	"sync"
	"time"

	"github.com/bulwark-go/bulwark/internal/deadline"
)

// watch wakes the callers of a Pool that wait on a *deadline.Context (see Pool.waitDeadline)
// at their deadlines, with one timer for the whole Pool instead of one per call: a caller
// blocked on a timer of its own puts it in the runtime's timer heap and takes it out again on
// every call, which cost about 500 ns a call (BenchmarkExecutePool against
// BenchmarkExecutePoolNoTimeout in ./command/, PERFORMANCE.md).
//
// The waiting jobs form a list in order of deadline (a new one usually goes at the tail: calls
// of one group mostly share a timeout), and the timer is armed for the earliest deadline, or
// earlier. A job that leaves the list does not move the timer: when it fires, it wakes the jobs
// whose deadline has come and rearms itself for the next one, if any. So with calls that end
// before their deadline it fires about once per timeout, whatever the rate of calls. A pending
// timer is no goroutine, and keeps the Pool reachable until it fires.
type watch struct {
	mu      sync.Mutex
	jobList             // by deadline; linked through job.links[watchList]
	timer   *time.Timer // made by the first add; fires watch.fire
	armed   bool        // the timer will fire, at `at`
	at      time.Duration
}

// add puts j, whose caller is about to wait until due (a deadline.Now reading), on the list,
// and arms the timer if it would otherwise fire too late for j.
func (w *watch) add(j *job, due time.Duration) {
	w.mu.Lock()
	j.due, j.watched = due, true
	at := w.tail
	for at != nil && at.due > due {
		at = at.links[watchList].prev
	}
	w.insertAfter(j, at, watchList)
	if !w.armed || due < w.at {
		w.arm(due)
	}
	w.mu.Unlock()
}

// remove takes j off the list and reports true, or reports false if the timer already did and
// woke j (its signal is in j.done: remove's caller takes it).
func (w *watch) remove(j *job) bool {
	w.mu.Lock()
	if !j.watched {
		w.mu.Unlock()
		return false
	}
	w.take(j)
	w.mu.Unlock()
	return true
}

// fire is the timer's: it wakes every job whose deadline has come and rearms the timer for
// the next deadline, if any job is left.
func (w *watch) fire() {
	w.mu.Lock()
	w.armed = false
	now := deadline.Now()
	for w.head != nil && w.head.due <= now {
		j := w.head
		w.take(j)
		j.done <- struct{}{} // the watch's one signal: never blocks (see job.done)
	}
	if w.head != nil {
		w.arm(w.head.due)
	}
	w.mu.Unlock()
}

// arm sets the timer to fire at due. w.mu must be held.
func (w *watch) arm(due time.Duration) {
	d := due - deadline.Now()
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.fire)
	} else {
		w.timer.Reset(d)
	}
	w.armed, w.at = true, due
}

// take takes j off the list. w.mu must be held.
func (w *watch) take(j *job) {
	w.unlink(j, watchList)
	j.watched = false
}
