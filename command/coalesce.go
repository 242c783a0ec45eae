package command

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/bulwark-go/bulwark/internal/wrap"
	"github.com/bulwark-go/bulwark/metrics"
)

// Keyer is implemented by a command that says which of its calls may
// share a Run (CommandConfig.Coalesce): calls of the same command with the
// same Key get the same answer, so the Key must name everything the answer
// depends on (getProfile{id: 7} returns "7"). A Key that returns "" or
// panics (logged), or a command without one, leaves the call to run alone.
// WithKey does not change it: WithKey is the caller's key for the rate
// limit, and two requests of one caller must not share an answer.
type Keyer interface {
	Key() string
}

// flights are a command's coalesced calls in flight, by key: at most one
// per key. The zero value is ready; the map is made at the first flight.
type flights struct {
	mu sync.Mutex
	m  map[string]any // a *flight[T] of the command's result type
}

// flight is one shared Run: the call of the first caller of a key (its
// leader), made on a goroutine of its own with the leader's context
// without its cancellation (flightContext), for the leader and every call
// of the same key that comes while it runs. No caller's deadline or
// departure ends it for the others.
type flight[T any] struct {
	done chan struct{} // closed when the answer below is in

	// The answer, written before done closes, read-only after: the
	// flight's call as finish left it, and its value.
	call call
	v    T

	// Under flights.mu.
	waiting int  // the callers waiting for the answer, the leader included
	over    bool // the answer is in: a caller about to leave takes it instead
}

// flightContext is the context of a flight's call: its leader's, without
// its cancellation. A call with it runs alone (coalesce), as the flight.
type flightContext struct{ context.Context }

// errGoexit is the error of the answer of a flight whose Run called
// runtime.Goexit (on the flight's goroutine, in a Semaphore group).
var errGoexit = errors.New("command: Run called runtime.Goexit")

// fallbackEvents are the events of a fallback and the kinds of a degraded
// answer: the ones a COALESCED call takes from the answer it shares.
var fallbackEvents = metrics.SetOf(metrics.FallbackSuccess, metrics.FallbackFailure,
	metrics.FallbackRejection, metrics.FallbackMissing) | degradations

// coalesce is the stage after begin of a call of a command that coalesces
// (CommandConfig.Coalesce). It finds the call's key; with none (or in the
// flight's own call) it reports false and the call runs alone. Otherwise
// the call waits for the flight of its key and takes its answer, and
// coalesce reports true: the call is answered and its books are closed.
//
// The first call of a key starts the flight and is its leader: the
// flight's call is the leader's, recorded once by the flight with its own
// outcome (the leader's own books close without a record); the leader
// waits for it, or for its own context (CANCELLED, and the flight goes
// on). A call that joins a flight is COALESCED: it waits for the answer,
// or for its own timeout (TIMEOUT, answered by its own fallback) or its
// context (CANCELLED), whichever comes first, and is recorded with that
// outcome; neither breaker sees it. If the command has a fallback.LastGood whose
// value is no older than its maximum age, a call that joins is answered
// at once with that value (COALESCED, FALLBACK_SUCCESS and the kind the
// command declares, DEGRADED_LAST_GOOD for the embedded fallback.LastGood;
// degraded), while the flight revalidates it.
func (k *commandCall[T, C]) coalesce(opts []Option) bool {
	if _, own := k.ctx.(flightContext); own {
		return false
	}
	key := k.g.coalesceKey(any(k.cmd))
	if key == "" {
		return false
	}
	fs := &k.c.flights
	fs.mu.Lock()
	f, joined := fs.m[key].(*flight[T])
	switch {
	case joined && k.stale():
		fs.mu.Unlock()
		k.finish()
		return true
	case joined:
		f.waiting++
		k.c.hot.coalescing.Add(1)
	case fs.m[key] != nil: // a flight of another result type under the same name
		fs.mu.Unlock()
		return false
	default:
		f = &flight[T]{done: make(chan struct{}), waiting: 1}
		if fs.m == nil {
			fs.m = map[string]any{}
		}
		fs.m[key] = f
	}
	fs.mu.Unlock()
	if !joined {
		k.c.hot.inFlight.Add(-1) // the flight's call is in flight for the leader's
		lead := &commandCall[T, C]{call: call{ctx: flightContext{context.WithoutCancel(k.ctx)}, g: k.g}, cmd: k.cmd}
		go lead.fly(f, key, append([]Option(nil), opts...))
	}
	switch left := k.await(f, !joined); {
	case joined:
		k.finish()
	case left: // the leader left: its call is the flight's, recorded when it lands
		k.events.Add(metrics.ExceptionThrown)
	}
	return true
}

// coalesceKey returns the coalescing key of a call of cmd: its Key
// method's (Keyer), or "". A panic in Key is logged and leaves "". (The
// rate limit's key is WithKey's: keyOf.)
func (g *Group) coalesceKey(cmd any) (key string) {
	kr, ok := cmd.(Keyer)
	if !ok {
		return ""
	}
	defer g.recoverHook("Key")
	return kr.Key()
}

// stale answers a call that joins a flight with the command's last good
// value (an embedded fallback.LastGood) if it is no older than its maximum age,
// and reports whether it did. A NoFallback group or command never gets one.
func (k *commandCall[T, C]) stale() bool {
	lg, ok := any(k.cmd).(lastGooder[T])
	if _, fallsBack := wrap.Fallback[T](any(k.cmd)); !ok || !fallsBack || k.cs.noFallback {
		return false
	}
	v, age, ok := lg.Load()
	if !ok || age > lg.MaxAge() {
		return false
	}
	k.v, k.attempts = v, 0
	k.r = result{event: metrics.Coalesced}
	k.events = metrics.SetOf(metrics.Coalesced)
	k.degrade(any(k.cmd), false)
	k.now = k.g.clock.Now()
	return true
}

// lastGooder is implemented by the commands that embed a
// *fallback.LastGood[T]: Load and MaxAge are its methods.
type lastGooder[T any] interface {
	Load() (v T, age time.Duration, ok bool)
	MaxAge() time.Duration
}

// fly makes the call k, the flight f of key, as any call is made
// (execute: its flightContext keeps it from coalescing with itself), and
// hands its answer to f. If no caller waits for it any more, Run's value
// goes to Discard.
func (k *commandCall[T, C]) fly(f *flight[T], key string, opts []Option) {
	landed := false
	defer func() {
		if !landed { // Run called runtime.Goexit: goexit has closed the call's books as a FAILURE
			k.r = result{event: metrics.Failure, err: errGoexit}
			k.events = metrics.SetOf(metrics.Failure, metrics.ExceptionThrown)
			k.err = &Error{Group: k.g.name, Command: k.c.name, Event: metrics.Failure, Err: errGoexit}
			k.land(f, key)
		}
	}()
	k.execute(opts)
	landed = true
	k.land(f, key)
}

// land hands the answer of the flight's call k to f and ends the flight
// of key: a call of that key that comes now starts a new one.
func (k *commandCall[T, C]) land(f *flight[T], key string) {
	f.call, f.v = k.call, k.v
	fs := &k.c.flights
	fs.mu.Lock()
	delete(fs.m, key)
	f.over = true
	waiting := f.waiting
	fs.mu.Unlock()
	close(f.done)
	if waiting == 0 && !k.degraded {
		discard(k.g, &k.cmd, k.v)
	}
}

// await waits for the answer of flight f, or for the call's own context
// to end (CANCELLED) or, for a call that joined f (not its leader, whose
// timeout is the flight's), its own timeout (TIMEOUT, then its own
// fallback), and leaves the call's answer in k. It reports whether the
// call left before the answer came.
func (k *commandCall[T, C]) await(f *flight[T], leader bool) bool {
	var expired <-chan time.Time
	if timeout := k.waitLimit(leader); timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	var left result
	select {
	case <-f.done:
		k.take(f, leader)
		return false
	case <-k.ctx.Done():
		left = result{event: metrics.Cancelled, err: k.ctx.Err()}
	case <-expired:
		left = result{event: metrics.Timeout, err: context.DeadlineExceeded}
	}
	if !k.leave(f, leader) {
		k.take(f, leader) // the answer came as the call was leaving
		return false
	}
	k.r, k.attempts = left, 0
	k.events = metrics.SetOf(left.event)
	k.now = k.g.clock.Now()
	k.fallback()
	return true
}

// waitLimit returns how long a call may wait for a flight: its own
// timeout (cut to its caller's deadline less the reserve, as a Run's
// is), or 0 for no limit but its context: for the leader, whose timeout
// is the flight's.
func (k *call) waitLimit(leader bool) time.Duration {
	switch {
	case leader || k.timeout <= 0:
		return 0
	case k.cs.reserve > 0:
		return reserved(k.ctx, k.timeout, k.cs.reserve)
	}
	return k.timeout
}

// leave takes the call out of the flight's waiting callers, unless the
// answer is already in: then it reports false (take it).
func (k *commandCall[T, C]) leave(f *flight[T], leader bool) bool {
	fs := &k.c.flights
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f.over {
		return false
	}
	f.waiting--
	if !leader {
		k.c.hot.coalescing.Add(-1)
	}
	return true
}

// take gives the call the answer of the flight f. The leader gets the
// flight's call as it is (its outcome, events, latencies: the flight was
// its call). A call that joined is COALESCED, with the value, the error
// and the fallback events of the answer (a degraded answer is degraded for
// each caller). The value is shared: every caller gets a copy of the same
// T, so a T that holds pointers must be read-only for its callers.
func (k *commandCall[T, C]) take(f *flight[T], leader bool) {
	k.v = f.v
	if leader {
		ctx := k.ctx
		k.call = f.call
		k.ctx = ctx
		return
	}
	k.c.hot.coalescing.Add(-1)
	k.err, k.degraded, k.attempts = f.call.err, f.call.degraded, 0
	k.r = result{event: metrics.Coalesced}
	k.events = f.call.events&fallbackEvents | metrics.SetOf(metrics.Coalesced)
	k.now = k.g.clock.Now()
}
