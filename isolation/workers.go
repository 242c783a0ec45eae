package isolation

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/panjf2000/ants/v2"
)

// Workers is a set of worker goroutines that several Pools share (PoolConfig.Workers), so that a
// Pool costs no goroutine of its own while it is idle: the set keeps two goroutines of its own
// (ants' clock and its purge of idle workers) whatever the number of Pools, and a worker left
// idle by any of them exits after about a second. Each Pool keeps its own size, queue and
// admission; only the goroutines are shared. Create it with NewWorkers and Close it after the
// Pools that use it. Workers is safe for concurrent use.
type Workers struct {
	ants   *ants.Pool
	logger *slog.Logger

	mu     sync.Mutex
	pools  int           // Pools attached and not yet closed
	idle   chan struct{} // closed when pools falls to 0 after Close began; nil before
	dirty  bool          // a Pool closed with calls still running on these workers
	closed bool
}

// NewWorkers returns an empty set of shared workers. logger receives ants' own log lines (only
// a panic that escaped a worker, which a Pool recovers first); nil means slog.Default().
func NewWorkers(logger *slog.Logger) (*Workers, error) {
	w := &Workers{logger: logger}
	// Unbounded and nonblocking, as a Pool's own workers are (see NewPool): admission is each
	// Pool's.
	var err error
	if w.ants, err = ants.NewPool(-1, ants.WithNonblocking(true), ants.WithLogger(antsLogger{w.log})); err != nil {
		return nil, fmt.Errorf("isolation: starting shared workers: %w", err)
	}
	return w, nil
}

// attach counts a new Pool on w; it fails once w is closed.
func (w *Workers) attach() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	w.pools++
	return nil
}

// detach is the end of a Pool's Close; running says whether calls of the Pool still run.
func (w *Workers) detach(running bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pools--
	w.dirty = w.dirty || running
	if w.pools == 0 && w.idle != nil {
		close(w.idle)
	}
}

// Close stops the workers. NewPool refuses w from then on. Close waits, until ctx ends, for the
// Pools on w to be closed (their Close, which waits for their calls), and then releases the
// workers. When every Pool was closed with its calls finished it waits for the workers'
// goroutines to exit (at once: none has work left, so that wait is not bounded by ctx) and
// returns nil. When ctx ends first, or a Pool's Close was cut off with calls still running, it
// releases the workers without waiting (each running call keeps its goroutine until its work
// returns) and, for the first case, returns an error matching ctx's. A second Close returns
// ErrClosed.
func (w *Workers) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.closed = true
	w.idle = make(chan struct{})
	if w.pools == 0 {
		close(w.idle)
	}
	w.mu.Unlock()
	select {
	case <-w.idle:
	case <-ctx.Done():
	}
	w.mu.Lock()
	open, dirty := w.pools, w.dirty
	w.mu.Unlock()
	if open > 0 {
		w.ants.Release()
		return fmt.Errorf("isolation: shared workers released with %d pools still open: %w", open, ctx.Err())
	}
	if dirty {
		w.ants.Release()
		return nil
	}
	if err := w.ants.ReleaseContext(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("isolation: close: waiting for idle workers to exit: %w", err)
	}
	return nil
}

func (w *Workers) log() *slog.Logger {
	if w.logger != nil {
		return w.logger
	}
	return slog.Default()
}
