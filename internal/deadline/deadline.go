// Package deadline is the context a call with a timeout gives Run: its
// caller's context with a deadline, for one allocation and no timer until
// something waits on it.
//
// context.WithTimeout costs four or five allocations and arms a timer on
// every call, whether or not anything ever waits on the context. A
// *Context arms nothing until Done is called: Err compares the monotonic
// clock with the deadline and asks the parent, so a Run that never selects
// on its context (most of them) costs the clock read and nothing else (and
// a caller that has read the clock already hands it that reading instead:
// NewAt, ErrAt). The
// first Done makes the channel and arms a timer for the deadline, plus a
// registration with the parent (context.AfterFunc) when the parent can end
// (its Done is not nil); its end (Cancel, say) releases both. A caller that times the
// deadline itself (isolation.Pool, with one timer for all its callers)
// reads Due against Now, selects on ParentDone and calls Expire when the
// deadline has come: Run's context then ends without a timer of its own.
//
// The Context behaves as context.WithTimeout's would; where the two could
// differ, it does this:
//   - Value is the parent's, except the key context.Cause asks (next item):
//     the caller's values still reach Run.
//   - context.Cause returns context.DeadlineExceeded after the deadline and
//     context.Canceled after Cancel, as for context.WithTimeout; after the
//     parent ended first, the parent's cause. It is never nil once Err is
//     not. (Cause looks its answer up through Value with a key of package
//     context's own; Context learns that key once, by asking Cause about a
//     context that records the question, and answers it with a context
//     canceled with the right cause. Should a release of Go ask otherwise,
//     Value delegates that key too, and Cause returns the parent's cause when
//     the parent ended later, else Err.)
//   - When both the parent and the deadline have ended before anything
//     looked, the parent wins unless it is the parent's own deadline and
//     that is the later one: nothing recorded which came first, and a
//     caller's cancellation must not be taken for the dependency's slowness.
//     Once Err has returned non-nil, it returns the same error for good.
//   - Whoever ends it closes Done (once made) just after Err starts to
//     report the end, rather than in one step with it; a Done called after
//     Err returned non-nil returns a closed channel.
//   - Deadline is the earlier of the parent's and its own.
//   - Expired tells whether its own deadline ended it (a TIMEOUT, for
//     bulwark), by its type rather than through Cause.
//
// A Context is safe for concurrent use, and stays valid after Cancel (Run
// may keep its context, and detached work outlives its caller): it is
// never recycled.
package deadline

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// epoch is the origin of the monotonic readings a Context compares:
// time.Since of it reads only the monotonic clock, about half the price of
// time.Now on the VMs bulwark is measured on.
var epoch = time.Now()

// What ended a Context (its state): nothing yet, its own deadline, its
// parent, or Cancel.
const (
	live int32 = iota
	expired
	parentEnded
	canceled
)

// Context is a context.Context over a parent, ending at the earlier of the
// parent's end and its own deadline, or at Cancel. Create it with New.
type Context struct {
	parent context.Context
	due    time.Duration         // the deadline, as Now()
	state  atomic.Int32          // live, expired, parentEnded or canceled; set once
	armed  atomic.Pointer[armed] // made by the first Done
}

// armed is what the first Done adds to a Context: its channel, and what
// closes it. It is a separate allocation, so that a Context nobody waits on
// stays small.
type armed struct {
	done   chan struct{}
	mu     sync.Mutex // guards what follows
	closed bool       // done is closed, timer and stop released, afters started
	timer  *time.Timer
	stop   func() bool // ends the registration with the parent
	afters []*waiter   // AfterFunc's, started when the Context ends
}

// New returns parent with a deadline timeout from now (timeout > 0). Call
// Cancel when the work is done.
func New(parent context.Context, timeout time.Duration) *Context {
	return NewAt(parent, Now(), timeout)
}

// NewAt is New for a caller that has read the clock already: the timeout
// counts from now, a reading of Now, instead of from a reading of its own.
func NewAt(parent context.Context, now, timeout time.Duration) *Context {
	due := now + timeout
	if due < now { // a timeout beyond any clock (the sum overflowed): never
		due = math.MaxInt64
	}
	return &Context{parent: parent, due: due}
}

// Deadline returns the earlier of the parent's deadline and c's own.
func (c *Context) Deadline() (time.Time, bool) {
	own := epoch.Add(c.due)
	if d, ok := c.parent.Deadline(); ok && d.Before(own) {
		return d, true
	}
	return own, true
}

// Value returns the parent's value for key, except for the key
// context.Cause looks up once c has ended by its deadline or Cancel (see
// the package doc).
func (c *Context) Value(key any) any {
	if key == causeKey && causeKey != nil {
		switch c.state.Load() {
		case expired:
			return causeOf[expired].Value(key)
		case canceled:
			return causeOf[canceled].Value(key)
		}
	}
	return c.parent.Value(key)
}

// Err returns nil while c is live; context.DeadlineExceeded once its
// deadline has passed (it reads the clock to know), context.Canceled after
// Cancel, or the parent's error once the parent ended first. It ends c (and
// closes Done, if made) when it finds it has ended.
func (c *Context) Err() error {
	if s := c.state.Load(); s != live {
		return c.errOf(s)
	}
	return c.check(Now() >= c.due)
}

// ErrAt is Err for a caller that has read the clock already: it tells
// whether c had ended at now, a reading of Now, instead of reading the
// clock itself (and ends c if it had).
func (c *Context) ErrAt(now time.Duration) error {
	if s := c.state.Load(); s != live {
		return c.errOf(s)
	}
	return c.check(now >= c.due)
}

// Expired reports whether c ended by its own deadline, not by its parent
// nor by Cancel. It does not read the clock: call it once Err is not nil.
func (c *Context) Expired() bool { return c.state.Load() == expired }

// Done returns a channel closed when c ends. The first call makes it and
// arms a timer for the deadline, plus a registration with the parent when
// the parent can end; c's end releases both.
func (c *Context) Done() <-chan struct{} {
	if a := c.armed.Load(); a != nil {
		return a.done
	}
	a := &armed{done: make(chan struct{})}
	if c.armed.CompareAndSwap(nil, a) {
		// Arm unless c has ended. An end from now on sees a (end swaps the
		// state, then loads armed; this stored armed, then loads the state:
		// one of the two sees the other's write) and releases it once this
		// unlocks.
		a.mu.Lock()
		if c.state.Load() == live {
			a.timer = time.AfterFunc(c.due-Now(), c.expire)
			if c.parent.Done() != nil {
				a.stop = context.AfterFunc(c.parent, c.wake)
			}
		}
		a.mu.Unlock()
	} else {
		a = c.armed.Load() // another Done's, which arms it
	}
	if c.Err() != nil { // ended before, or due now: closed before Done returns
		a.release()
	}
	return a.done
}

// Now reads the monotonic clock that Contexts compare their deadlines with.
func Now() time.Duration { return time.Since(epoch) }

// Due returns c's own deadline (regardless of the parent's) as a reading of
// Now.
func (c *Context) Due() time.Duration { return c.due }

// ParentDone returns the parent's Done channel (nil for a parent that
// never ends), for a caller that times the deadline itself (see Expire).
func (c *Context) ParentDone() <-chan struct{} { return c.parent.Done() }

// Expire tells c that its deadline has come, for a caller whose own timer,
// armed for Due, has fired: c ends as if its clock said so (unless its
// parent ended first), and its Err is then not nil.
func (c *Context) Expire() { c.check(true) }

// Cancel ends c with context.Canceled if it is live, and releases its timer
// and its registration with the parent. It may be called more than once.
func (c *Context) Cancel() { c.end(canceled) }

// AfterFunc arranges to call f in its own goroutine once c ends, as
// context.AfterFunc does; stop, called before that, prevents it and
// reports true. context.AfterFunc and context.WithCancel on c use it (the
// package context looks for this method), so a context derived from c
// costs no goroutine.
func (c *Context) AfterFunc(f func()) (stop func() bool) {
	c.Done()
	a, w := c.armed.Load(), &waiter{f: f}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		w.start()
		return w.stop
	}
	a.afters = append(a.afters, w)
	a.mu.Unlock()
	return w.stop
}

// errOf returns the error of an ended Context in state s.
func (c *Context) errOf(s int32) error {
	switch s {
	case expired:
		return context.DeadlineExceeded
	case canceled:
		return context.Canceled
	}
	return c.parent.Err()
}

// check decides whether live c has ended, given whether its own deadline
// has passed (due), ends it if so, and returns Err. See the package doc for
// which end wins when both have come.
func (c *Context) check(due bool) error {
	s := live
	if err := c.parent.Err(); err != nil {
		s = parentEnded
		if due && err == context.DeadlineExceeded {
			if d, ok := c.parent.Deadline(); ok && epoch.Add(c.due).Before(d) {
				s = expired
			}
		}
	} else if due {
		s = expired
	}
	if s == live {
		return nil
	}
	c.end(s)
	return c.errOf(c.state.Load())
}

// expire is the timer's: the deadline has come.
func (c *Context) expire() { c.check(true) }

// wake is the parent's registration: the parent has ended.
func (c *Context) wake() { c.Err() }

// end ends c in state s if it is live. Only once Done was called is there
// anything to close or release (see Done for why a Done made meanwhile is
// not missed): whoever ends c closes Done right after Err reports the end.
func (c *Context) end(s int32) {
	if !c.state.CompareAndSwap(live, s) {
		return
	}
	if a := c.armed.Load(); a != nil {
		a.release()
	}
}

// release closes done, stops the timer and the registration with the
// parent, and starts the AfterFunc callbacks, once: the Context has ended.
func (a *armed) release() {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.closed = true
	close(a.done)
	if a.timer != nil {
		a.timer.Stop()
	}
	if a.stop != nil {
		a.stop()
	}
	started := a.afters
	a.timer, a.stop, a.afters = nil, nil, nil
	a.mu.Unlock()
	start(started)
}

// waiter is one AfterFunc callback: whichever of start and stop claims it
// first decides whether it runs.
type waiter struct {
	f       func()
	claimed atomic.Bool
}

func (w *waiter) start() {
	if w.claimed.CompareAndSwap(false, true) {
		go w.f()
	}
}

func (w *waiter) stop() bool { return w.claimed.CompareAndSwap(false, true) }

func start(ws []*waiter) {
	for _, w := range ws {
		w.start()
	}
}

// causeKey is the key context.Cause asks a context's Value for (the address
// of a variable of package context's own), learnt by asking Cause about a
// keyProbe, and confirmed by a context of package context answering it with
// itself; nil if Cause asked nothing so confirmed. causeOf holds, for each
// end Value answers that key for, a context canceled with its cause.
var (
	causeKey = probeCauseKey()
	causeOf  = [...]context.Context{
		expired:  canceledWith(context.DeadlineExceeded),
		canceled: canceledWith(context.Canceled),
	}
)

// keyProbe is an ended context that records the last key it was asked for.
type keyProbe struct {
	context.Context
	key any
}

func (p *keyProbe) Err() error { return context.Canceled }

func (p *keyProbe) Value(key any) any {
	p.key = key
	return nil
}

func probeCauseKey() any {
	p := &keyProbe{Context: context.Background()}
	_ = context.Cause(p)
	if p.key == nil {
		return nil
	}
	if c := canceledWith(context.Canceled); c.Value(p.key) != any(c) {
		return nil
	}
	return p.key
}

func canceledWith(cause error) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	return ctx
}
