package breaker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// A health checker runs a check while the breaker is open and turns it
// half-open (ReasonHealthCheck) when the check passes. Package
// circuit/healthcheck's Start, Checker and Config are these, documented
// for users. A breaker has at most one checker; Allow and Record never
// read it: the breaker starts the checker's goroutine as it opens, and
// Snapshot reads its counts.

// ErrHealthCheckSkipped is returned by Checker.Check when it runs no
// check: the breaker is not open (or is forced open), another check is
// running, or the checker was stopped.
var ErrHealthCheckSkipped = errors.New("circuit: health check skipped")

// CheckSettings is what a Checker runs on, valid and with defaults applied
// (package circuit/healthcheck documents every field).
type CheckSettings struct {
	Check    func(context.Context) error
	Interval time.Duration // <= 0: none scheduled (Checker.Check only)
	Timeout  time.Duration
}

// Checker runs CheckSettings.Check for the breaker it was started on.
type Checker struct {
	b *Breaker
	s CheckSettings

	busy     atomic.Bool // a check is running: checks never overlap
	checks   atomic.Int64
	failures atomic.Int64
	lastErr  atomic.Pointer[string] // error text of the last check; nil if it passed

	ctx    context.Context // ended by Stop; parent of every scheduled check
	cancel context.CancelFunc
	wg     sync.WaitGroup // the scheduling goroutine

	// Under the breaker's mu.
	running bool // the scheduling goroutine exists
	stopped bool // Stop was called: schedule nothing more
}

// StartChecker attaches a checker running s to b. If b is open now (not
// forced), the checker's schedule starts at once; else with the next
// opening. A breaker has at most one checker: StartChecker while another
// runs (not stopped) is an error.
func (b *Breaker) StartChecker(s CheckSettings) (*Checker, error) {
	c := &Checker{b: b, s: s}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	now := b.clock.Now()
	b.mu.Lock()
	if !b.checker.CompareAndSwap(nil, c) {
		b.mu.Unlock()
		c.cancel()
		return nil, fmt.Errorf("circuit: breaker %q has a health checker already", b.cfg().Name)
	}
	b.advanceLocked(now)
	if w := word(b.word.Load()); w.state() == Open {
		c.startLocked(w.mode())
	}
	b.unlockAndEmit()
	return c, nil
}

// status returns the checker's part of a Snapshot, the line that
// circuit.Snapshot.HealthCheck documents: "14 checks, 3 failed; last
// failed: <error>" (or "; last passed"), "" before the first check.
// Failures is read before checks, so that the line never counts more
// failures than checks while a check ends.
func (c *Checker) status() string {
	failures := c.failures.Load()
	checks := c.checks.Load()
	if checks == 0 {
		return ""
	}
	noun := "checks"
	if checks == 1 {
		noun = "check"
	}
	last := "last passed"
	if e := c.lastErr.Load(); e != nil {
		last = "last failed"
		if *e != "" {
			last += ": " + *e
		}
	}
	return fmt.Sprintf("%d %s, %d failed; %s", checks, noun, failures, last)
}

// healthStatus returns the Snapshot's HealthCheck: the attached checker's
// status, or "" without one.
func (b *Breaker) healthStatus() string {
	if c := b.checker.Load(); c != nil {
		return c.status()
	}
	return ""
}

// startHealthCheckLocked starts the attached checker's schedule as the
// breaker opens in mode m. b.mu must be held.
func (b *Breaker) startHealthCheckLocked(m Mode) {
	if c := b.checker.Load(); c != nil {
		c.startLocked(m)
	}
}

// startLocked starts the scheduling goroutine as the breaker opens in mode
// m, unless checks are not scheduled or it already runs. The breaker's mu
// must be held.
func (c *Checker) startLocked(m Mode) {
	if c.s.Interval <= 0 || m.forced() || c.running || c.stopped {
		return
	}
	c.running = true
	c.wg.Add(1)
	go c.loop()
}

// loop runs a check every Interval while the breaker is open, and returns
// once it is not (or Stop is called). Whether to go on is decided under
// the breaker's mu, where startLocked looks at running: an opening never
// finds a loop that is about to quit.
func (c *Checker) loop() {
	b := c.b
	defer c.wg.Done()
	timer := time.NewTimer(c.s.Interval)
	defer timer.Stop()
	for {
		select {
		case <-c.ctx.Done():
			b.mu.Lock()
			c.running = false
			b.mu.Unlock()
			return
		case <-timer.C:
		}
		now := b.clock.Now()
		b.mu.Lock()
		b.advanceLocked(now)
		if !c.checkableLocked() {
			c.running = false
			b.unlockAndEmit()
			return
		}
		b.unlockAndEmit()
		// A skipped check (a Check call running) waits for the next tick.
		_ = c.Check(c.ctx)
		timer.Reset(c.s.Interval)
	}
}

// checkableLocked reports whether a check may move the breaker: open, not
// forced open, and the checker not stopped. The breaker's mu must be held.
func (c *Checker) checkableLocked() bool {
	w := word(c.b.word.Load())
	return w.state() == Open && !w.mode().forced() && !c.stopped
}

// Check is healthcheck.Checker.Check.
func (c *Checker) Check(ctx context.Context) error {
	b := c.b
	name := b.cfg().Name
	if !c.busy.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: a check is running", ErrHealthCheckSkipped)
	}
	defer c.busy.Store(false)
	now := b.clock.Now()
	b.mu.Lock()
	b.advanceLocked(now)
	ok, gen := c.checkableLocked(), word(b.word.Load()).gen()
	b.unlockAndEmit()
	if !ok {
		return fmt.Errorf("%w: breaker %q is not open, or the checker is stopped", ErrHealthCheckSkipped, name)
	}
	err := c.run(ctx)
	c.checks.Add(1)
	if err != nil {
		c.failures.Add(1)
		msg := err.Error()
		c.lastErr.Store(&msg)
		return fmt.Errorf("circuit: health check failed: breaker %q: %w", name, err)
	}
	c.lastErr.Store(nil)
	now = b.clock.Now()
	b.mu.Lock()
	b.advanceLocked(now)
	if w := word(b.word.Load()); w.gen() == gen && c.checkableLocked() {
		b.transitionLocked(now, HalfOpen, w.mode(), ReasonHealthCheck)
	}
	b.unlockAndEmit()
	return nil
}

// run calls the check with its timeout, turning a panic into an error
// (logged at Error level with its stack).
func (c *Checker) run(ctx context.Context) (err error) {
	ctx, cancel := context.WithTimeout(ctx, c.s.Timeout)
	defer cancel()
	defer func() {
		if v := recover(); v != nil {
			stack := string(debug.Stack())
			s := c.b.cfg()
			s.Logger.LogAttrs(context.Background(), slog.LevelError, "circuit breaker health check panicked",
				slog.String("breaker", s.Name), slog.Any("panic", v), slog.String("stack", stack))
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return c.s.Check(ctx)
}

// Stop is healthcheck.Checker.Stop: it detaches the checker, cancels a
// check in progress and waits for the scheduling goroutine.
func (c *Checker) Stop() {
	b := c.b
	b.mu.Lock()
	c.stopped = true
	b.checker.CompareAndSwap(c, nil)
	b.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}
