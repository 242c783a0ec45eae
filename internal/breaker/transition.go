package breaker

import (
	"context"
	"log/slog"
	"math"
	"runtime/debug"
	"slices"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// Health summarises the breaker's window: the calls that reached the
// dependency and the two ratios the breaker trips on.
type Health struct {
	Requests   int64   // Success + Failure + Timeout
	Failures   int64   // Failure
	Timeouts   int64   // Timeout
	Slow       int64   // successes slower than SlowCallDuration
	ErrorRatio float64 // (Failures + Timeouts) / Requests; 0 when Requests is 0
	SlowRatio  float64 // Slow / Requests; 0 when Requests is 0

	// The ratios the breaker compares with its thresholds: with
	// Confidence set, the lower bounds of their Wilson score intervals at
	// that confidence; without, the ratios themselves.
	ErrorBound, SlowBound float64
}

// healthEvents are the events healthOf reads: the only ones a breaker's
// window (a windowed.Tally) counts, and the only ones it needs to judge.
const healthEvents metrics.EventSet = 1<<metrics.Success | 1<<metrics.Failure | 1<<metrics.Timeout | 1<<metrics.Slow

// healthOf derives Health from window counts (of healthEvents).
func healthOf(c metrics.Counts) Health {
	h := Health{
		Requests: c[metrics.Success] + c[metrics.Failure] + c[metrics.Timeout],
		Failures: c[metrics.Failure],
		Timeouts: c[metrics.Timeout],
		Slow:     c[metrics.Slow],
	}
	if h.Requests > 0 {
		h.ErrorRatio = float64(h.Failures+h.Timeouts) / float64(h.Requests)
		h.SlowRatio = float64(h.Slow) / float64(h.Requests)
	}
	return h
}

// Transition records one change of effective state.
type Transition struct {
	Name         string        // the breaker's name
	From, To     State         // effective states before and after
	Reason       Reason        // why
	At           time.Duration // clock reading when the breaker made the change
	Health       Health        // the window when the change was made
	OpenDuration time.Duration // the open duration in force after the change
}

// health returns the Health of the window of settings c at now.
func (c *settings) health(now time.Duration) Health {
	h := healthOf(c.window.Counts(now))
	h.ErrorBound, h.SlowBound = h.ErrorRatio, h.SlowRatio
	if c.z > 0 {
		h.ErrorBound = wilsonLower(h.Failures+h.Timeouts, h.Requests, c.z)
		h.SlowBound = wilsonLower(h.Slow, h.Requests, c.z)
	}
	return h
}

// TransitionCount is how many transitions a breaker has made from one
// state to another for one reason since it was created.
type TransitionCount struct {
	From, To State
	Reason   Reason
	N        uint64
}

// countLocked adds one to the count of transitions from → to for reason.
// b.mu must be held. The few kinds a breaker ever makes are kept in the
// order they first happened; a breaker that never moves allocates nothing.
func (b *Breaker) countLocked(from, to State, reason Reason) {
	for i := range b.counts {
		if c := &b.counts[i]; c.From == from && c.To == to && c.Reason == reason {
			c.N++
			return
		}
	}
	b.counts = append(b.counts, TransitionCount{From: from, To: to, Reason: reason, N: 1})
}

// historySize is how many transitions a Snapshot keeps.
const historySize = 8

// transitionLocked moves the breaker to state to (with mode m) at now and
// queues the report. b.mu must be held. It publishes the new state word last,
// after everything a reader of that word may need (deadlines, probe slots,
// ramp-up counters) is in place. A Reset is a transition even from closed
// to closed, and starts no ramp-up.
func (b *Breaker) transitionLocked(now time.Duration, to State, m Mode, reason Reason) {
	old := word(b.word.Load())
	from := old.state()
	if to == from && reason != ReasonReset {
		// A change of mode only: no new generation, nothing reported.
		b.word.Store(uint64(makeWord(to, m, old.ramp(), old.gen())))
		return
	}
	gen := old.gen() + 1
	b.countLocked(from, to, reason)
	c := b.cfg()
	health := c.health(now)
	b.since = now
	ramp := false
	switch to {
	case Closed:
		c.window.Reset() // failures from before the close must not reopen it at once
		b.openFor = c.OpenDuration
		b.closes++
		b.lastClose = reason
		if c.RampUp > 0 && !m.forced() && reason != ReasonReset {
			ramp = true
			b.rampStart.Store(int64(now))
			b.rampCount.Store(0)
		}
	case Open:
		if from == HalfOpen && reason != ReasonForced {
			b.openFor = min(SatMul(b.openFor, c.Backoff), c.MaxOpenDuration)
		}
		b.openUntil.Store(int64(satAdd(now, b.openFor)))
		b.startHealthCheckLocked(m)
	case HalfOpen:
		b.successes, b.failures = 0, 0
		b.halfOpenUntil.Store(math.MaxInt64) // no probe out yet
		b.probes.Store(uint64(gen) << genShift)
	}
	b.word.Store(uint64(makeWord(to, m, ramp, gen)))
	t := Transition{
		Name:         c.Name,
		From:         from,
		To:           to,
		Reason:       reason,
		At:           now,
		Health:       health,
		OpenDuration: b.openFor,
	}
	if len(b.history) == historySize {
		copy(b.history, b.history[1:])
		b.history = b.history[:historySize-1]
	}
	b.history = append(b.history, t)
	b.pending = append(b.pending, t)
}

// unlockAndEmit releases b.mu and then delivers queued transitions to the
// logger and OnTransition. Every transition is already applied to the state
// when it is queued. Deliveries are serialised and in order: if another
// goroutine is already delivering, it picks up what this one queued. A panic
// in OnTransition is recovered per transition (see deliver). If the Logger's
// handler panics or OnTransition calls runtime.Goexit, the rest of this
// batch is not reported, the breaker stays usable, and the next transition
// is delivered by whoever makes it.
func (b *Breaker) unlockAndEmit() {
	if b.emitting || len(b.pending) == 0 {
		b.mu.Unlock()
		return
	}
	b.emitting = true
	finished := false
	defer func() {
		if !finished {
			b.mu.Lock()
			b.emitting = false
			b.mu.Unlock()
		}
	}()
	for len(b.pending) > 0 {
		batch := b.pending
		b.pending = nil
		b.mu.Unlock()
		for _, t := range batch {
			b.report(t)
		}
		b.mu.Lock()
	}
	b.emitting = false
	b.mu.Unlock()
	finished = true
}

// report logs one transition and passes it to the observers (Observe) and
// then OnTransition. It runs without b.mu held.
func (b *Breaker) report(t Transition) {
	c := b.cfg()
	c.Logger.LogAttrs(context.Background(), slog.LevelInfo, "circuit breaker transition",
		slog.String("breaker", t.Name),
		slog.String("from", t.From.String()),
		slog.String("to", t.To.String()),
		slog.String("reason", string(t.Reason)),
		slog.Int64("requests", t.Health.Requests),
		slog.Int64("failures", t.Health.Failures),
		slog.Int64("timeouts", t.Health.Timeouts),
		slog.Int64("slow", t.Health.Slow),
		slog.Float64("error_ratio", t.Health.ErrorRatio),
		slog.Float64("slow_ratio", t.Health.SlowRatio),
		slog.Duration("open_duration", t.OpenDuration),
	)
	if obs := b.observers.Load(); obs != nil {
		for _, o := range *obs {
			deliver(c, t, "an observer", o.f)
		}
	}
	if c.OnTransition != nil {
		deliver(c, t, "OnTransition", c.OnTransition)
	}
}

// deliver passes t to f, an observer or the OnTransition of settings c
// (what names it in the log). A panic there is recovered and logged at
// Error level with its value and stack: an observer's bug must neither
// reach the caller of Allow, Record or SetMode nor keep later transitions
// from being reported.
func deliver(c *settings, t Transition, what string, f func(Transition)) {
	defer func() {
		if v := recover(); v != nil {
			c.Logger.LogAttrs(context.Background(), slog.LevelError, "circuit breaker "+what+" panicked",
				slog.String("breaker", t.Name),
				slog.String("from", t.From.String()),
				slog.String("to", t.To.String()),
				slog.String("reason", string(t.Reason)),
				slog.Any("panic", v),
				slog.String("stack", string(debug.Stack())),
			)
		}
	}()
	f(t)
}

// observer is one function Observe added.
type observer struct{ f func(Transition) }

// Observe is circuit.Breaker.Observe: f is called with every transition
// reported from now on, until stop.
func (b *Breaker) Observe(f func(Transition)) (stop func()) {
	if f == nil {
		return func() {}
	}
	o := &observer{f: f}
	b.mu.Lock()
	b.setObserversLocked(append(b.observersLocked(), o))
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		b.setObserversLocked(slices.DeleteFunc(b.observersLocked(), func(x *observer) bool { return x == o }))
		b.mu.Unlock()
	}
}

// observersLocked returns a copy of the observers. b.mu must be held.
func (b *Breaker) observersLocked() []*observer {
	if obs := b.observers.Load(); obs != nil {
		return slices.Clone(*obs)
	}
	return nil
}

// setObserversLocked replaces the observers with obs. b.mu must be held.
func (b *Breaker) setObserversLocked(obs []*observer) {
	if len(obs) == 0 {
		b.observers.Store(nil)
		return
	}
	b.observers.Store(&obs)
}
