package fleet

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Status tells whether shared state works, for a dashboard or a health
// check.
type Status struct {
	Degraded bool      // Config.DegradeAfter syncs in a row failed, and none worked since: every breaker judges alone
	Since    time.Time // when the current condition (degraded or not) began; zero before the first sync
	Err      string    // why it is degraded; "" when not
	Syncs    uint64    // syncs that succeeded
	Failures uint64    // syncs that failed (one alone does not degrade shared state)
	Rejected uint64    // records read from Redis and rejected (garbage, wrong type, skew, over MaxInstances)
}

// String returns "shared state: ok" or "shared state: degraded (why)".
func (s Status) String() string {
	if s.Degraded {
		return "shared state: degraded (" + s.Err + ")"
	}
	return "shared state: ok"
}

// statusBox holds the Status; degraded is read lock-free by the breakers'
// status.
type statusBox struct {
	degraded atomic.Bool
	mu       sync.Mutex
	s        Status
	failing  int // syncs failed in a row
}

// Status returns the fleet's shared-state status now.
func (f *Fleet) Status() Status {
	f.status.mu.Lock()
	defer f.status.mu.Unlock()
	return f.status.s
}

// failed records a failed sync; it reports whether shared state just
// degraded (the DegradeAfter-th failure in a row), and logs that once.
func (f *Fleet) failed(err error, now time.Time) bool {
	b := &f.status
	b.mu.Lock()
	defer b.mu.Unlock()
	b.s.Failures++
	b.failing++
	if b.s.Degraded {
		b.s.Err = err.Error()
		return false
	}
	if b.failing < f.cfg.DegradeAfter {
		return false
	}
	b.s.Degraded, b.s.Since, b.s.Err = true, now, err.Error()
	b.degraded.Store(true)
	f.cfg.Logger.LogAttrs(context.Background(), slog.LevelWarn, "fleet: shared state degraded, breakers judge alone",
		slog.String("service", f.cfg.Service), slog.String("instance", f.cfg.Instance),
		slog.Int("failed_syncs", b.failing), slog.String("error", err.Error()))
	return true
}

// succeeded records a sync that worked, and logs a recovery once.
func (f *Fleet) succeeded(now time.Time, rejected int) {
	b := &f.status
	b.mu.Lock()
	defer b.mu.Unlock()
	b.s.Syncs++
	b.failing = 0
	b.s.Rejected += uint64(rejected)
	if b.s.Since.IsZero() {
		b.s.Since = now
	}
	if !b.s.Degraded {
		return
	}
	b.s.Degraded, b.s.Since, b.s.Err = false, now, ""
	b.degraded.Store(false)
	f.cfg.Logger.LogAttrs(context.Background(), slog.LevelInfo, "fleet: shared state restored",
		slog.String("service", f.cfg.Service), slog.String("instance", f.cfg.Instance))
}
