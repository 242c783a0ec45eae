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

// ErrHealthCheckSkipped is returned by CheckHealth when it runs no check:
// no HealthCheck is configured, the breaker is not open (or is forced
// open), another check is running, or the breaker is closed for good
// (Close).
var ErrHealthCheckSkipped = errors.New("circuit: health check skipped")

// ErrHealthCheckFailed wraps the error of a health check that did not
// pass (a panic in it included).
var ErrHealthCheckFailed = errors.New("circuit: health check failed")

// HealthCheckStatus tells a health check's state in a Snapshot.
type HealthCheckStatus struct {
	Checks   int64  // checks run so far
	Failures int64  // checks that failed so far
	LastErr  string // error text of the last check; "" if it passed or none ran
}

// healthChecker runs Settings.HealthCheck for a breaker.
type healthChecker struct {
	busy     atomic.Bool // a check is running: checks never overlap
	checks   atomic.Int64
	failures atomic.Int64
	lastErr  atomic.Pointer[string]

	ctx    context.Context // ended by Close; parent of every scheduled check
	cancel context.CancelFunc
	wg     sync.WaitGroup // the scheduling goroutine

	// Under the breaker's mu.
	running bool // the scheduling goroutine exists
	closed  bool // Close was called: schedule nothing more
}

// init prepares the checker for the effective configuration cfg.
func (h *healthChecker) init() {
	h.ctx, h.cancel = context.WithCancel(context.Background())
}

// healthStatus returns the checker's part of a Snapshot.
func (b *Breaker) healthStatus() HealthCheckStatus {
	h, c := &b.health, b.cfg()
	if c.HealthCheck == nil {
		return HealthCheckStatus{}
	}
	s := HealthCheckStatus{
		Checks:   h.checks.Load(),
		Failures: h.failures.Load(),
	}
	if e := h.lastErr.Load(); e != nil {
		s.LastErr = *e
	}
	return s
}

// startHealthCheckLocked starts the scheduling goroutine as the breaker
// opens in mode m, unless checks are not scheduled or it already runs.
// b.mu must be held.
func (b *Breaker) startHealthCheckLocked(m Mode) {
	h := &b.health
	if b.cfg().HealthCheckInterval <= 0 || m.forced() || h.running || h.closed {
		return
	}
	h.running = true
	h.wg.Add(1)
	go b.healthLoop()
}

// healthLoop runs a check every HealthCheckInterval while the breaker is
// open, and returns once it is not (or Close is called). Whether to go on
// is decided under b.mu, where startHealthCheckLocked looks at running:
// an opening never finds a loop that is about to quit.
func (b *Breaker) healthLoop() {
	h := &b.health
	defer h.wg.Done()
	timer := time.NewTimer(b.cfg().HealthCheckInterval)
	defer timer.Stop()
	for {
		select {
		case <-h.ctx.Done():
			b.mu.Lock()
			h.running = false
			b.mu.Unlock()
			return
		case <-timer.C:
		}
		now := b.clock.Now()
		b.mu.Lock()
		b.advanceLocked(now)
		if !b.checkableLocked() {
			h.running = false
			b.unlockAndEmit()
			return
		}
		b.unlockAndEmit()
		// A skipped check (a CheckHealth call running) waits for the next tick.
		_ = b.CheckHealth(h.ctx)
		timer.Reset(b.cfg().HealthCheckInterval)
	}
}

// checkableLocked reports whether a health check may move the breaker:
// open, and not forced open. b.mu must be held.
func (b *Breaker) checkableLocked() bool {
	w := word(b.word.Load())
	return w.state() == Open && !w.mode().forced() && !b.health.closed
}

// CheckHealth is circuit.Breaker.CheckHealth.
func (b *Breaker) CheckHealth(ctx context.Context) error {
	h, c := &b.health, b.cfg() // one configuration for the whole check
	if c.HealthCheck == nil {
		return fmt.Errorf("%w: no HealthCheck configured", ErrHealthCheckSkipped)
	}
	if !h.busy.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: a check is running", ErrHealthCheckSkipped)
	}
	defer h.busy.Store(false)
	now := b.clock.Now()
	b.mu.Lock()
	b.advanceLocked(now)
	ok, gen := b.checkableLocked(), word(b.word.Load()).gen()
	b.unlockAndEmit()
	if !ok {
		return fmt.Errorf("%w: breaker %q is not open", ErrHealthCheckSkipped, c.Name)
	}
	err := c.runCheck(ctx)
	h.checks.Add(1)
	if err != nil {
		h.failures.Add(1)
		msg := err.Error()
		h.lastErr.Store(&msg)
		return fmt.Errorf("%w: breaker %q: %w", ErrHealthCheckFailed, c.Name, err)
	}
	h.lastErr.Store(nil)
	now = b.clock.Now()
	b.mu.Lock()
	b.advanceLocked(now)
	if w := word(b.word.Load()); w.gen() == gen && b.checkableLocked() {
		b.transitionLocked(now, HalfOpen, w.mode(), ReasonHealthCheck)
	}
	b.unlockAndEmit()
	return nil
}

// runCheck calls the health check of settings c with its timeout, turning
// a panic into an error (logged at Error level with its stack).
func (c *settings) runCheck(ctx context.Context) (err error) {
	ctx, cancel := context.WithTimeout(ctx, c.HealthCheckTimeout)
	defer cancel()
	defer func() {
		if v := recover(); v != nil {
			stack := string(debug.Stack())
			c.Logger.LogAttrs(context.Background(), slog.LevelError, "circuit breaker HealthCheck.Check panicked",
				slog.String("breaker", c.Name), slog.Any("panic", v), slog.String("stack", stack))
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return c.HealthCheck(ctx)
}

// Close is circuit.Breaker.Close: it stops the health checks and waits for
// their goroutine.
func (b *Breaker) Close() {
	h := &b.health
	if h.cancel == nil {
		return
	}
	b.mu.Lock()
	h.closed = true
	b.mu.Unlock()
	h.cancel()
	h.wg.Wait()
}
