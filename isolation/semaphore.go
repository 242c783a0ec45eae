package isolation

import (
	"context"
	"sync/atomic"
)

// DefaultSemaphoreMax is the Semaphore limit used when NewSemaphore gets 0: Hystrix's default
// for both semaphore-isolated commands and fallbacks (maxConcurrentRequests).
const DefaultSemaphoreMax = 10

// semClosed marks a closed Semaphore in its state word, beside the permit count.
const (
	semClosed = 1 << 62
	semCount  = semClosed - 1
)

// Semaphore is a bulkhead that counts permits: a lock-free counter, no goroutine, no channel,
// no allocation. Execute runs work on the caller's goroutine. A Semaphore is safe for
// concurrent use.
//
// There is no detachment: Execute returns only when work returns, so a work that ignores its
// context keeps the caller (and its permit) past the deadline. Use a Pool to bound how long
// callers wait for a dependency that does not honour cancellation.
//
// The same type is the fallback limiter: fallbacks run under a Semaphore of their own
// (NewSemaphore(0) gives Hystrix's default of DefaultSemaphoreMax), so that a fallback can
// never become the next thing that eats every goroutine.
type Semaphore struct {
	state     atomic.Int64 // permits taken | semClosed
	max       atomic.Int64
	largest   atomic.Int64
	completed atomic.Int64
	rejected  atomic.Int64
}

// NewSemaphore returns a Semaphore of max permits; 0 means DefaultSemaphoreMax. A negative max
// is an error wrapping ErrInvalidConfig.
func NewSemaphore(max int) (*Semaphore, error) {
	if err := checkRange("max", max, 0); err != nil {
		return nil, err
	}
	if max == 0 {
		max = DefaultSemaphoreMax
	}
	s := &Semaphore{}
	s.max.Store(int64(max))
	return s, nil
}

// TryAcquire takes a permit if one is free and reports whether it did, without blocking. On
// failure (all permits taken, or the Semaphore closed) it leaves the Semaphore unchanged
// except for the Rejected counter, which counts the refusals of a full Semaphore.
func (s *Semaphore) TryAcquire() bool {
	for {
		v := s.state.Load()
		if v&semClosed != 0 {
			return false
		}
		if v >= s.max.Load() {
			s.rejected.Add(1)
			return false
		}
		if s.state.CompareAndSwap(v, v+1) {
			// max is read again after the permit is taken: a Resize that shrank
			// it between the first read and the swap (once its drain was seen,
			// it promises that no permit is taken above the new max) gets the
			// permit back.
			if v+1 > s.max.Load() {
				s.state.Add(-1)
				s.rejected.Add(1)
				return false
			}
			for m := s.largest.Load(); v+1 > m && !s.largest.CompareAndSwap(m, v+1); m = s.largest.Load() {
			}
			return true
		}
	}
}

// Release returns a permit taken by TryAcquire. Releasing a permit that is not held panics.
func (s *Semaphore) Release() {
	if s.state.Add(-1)&semCount == semCount {
		panic("isolation: Semaphore released more permits than were acquired")
	}
	s.completed.Add(1)
}

// Execute takes a permit, runs work(ctx) on the caller's goroutine and releases the permit
// when work returns. It returns nil when work returned, a *PanicError when work panicked (the
// permit is released either way), an error matching ErrDropped and ctx.Err() without running
// work when ctx has already ended, ErrRejected at once when every permit is taken, and
// ErrClosed after Close.
//
// There is no detachment: a work that ignores ctx keeps the caller until it returns. Execute
// itself allocates nothing and work does not escape.
func (s *Semaphore) Execute(ctx context.Context, work func(ctx context.Context)) (err error) {
	if err := s.Enter(ctx); err != nil {
		return err
	}
	defer s.exit(&err)
	work(ctx)
	return nil
}

// Enter is Execute's admission, for a caller that runs its work itself (without a closure):
// it takes a permit and returns nil, or returns the error Execute would, without blocking and
// leaving the Semaphore unchanged but for its Rejected counter: an error matching ErrDropped
// and ctx.Err() when ctx has already ended, ErrRejected when every permit is taken, ErrClosed
// after Close. After a nil return the caller must Release the permit, also when its work
// panics (recover it with NewPanicError to report it as Execute does).
func (s *Semaphore) Enter(ctx context.Context) error {
	if cause := ctx.Err(); cause != nil {
		return dropped(cause)
	}
	if !s.TryAcquire() {
		if s.state.Load()&semClosed != 0 {
			return ErrClosed
		}
		return ErrRejected
	}
	return nil
}

// exit is deferred by Execute: it recovers a panic into *err and releases the permit (also
// when work calls runtime.Goexit).
func (s *Semaphore) exit(err *error) {
	if v := recover(); v != nil {
		*err = NewPanicError(v)
	}
	s.Release()
}

// Resize sets the number of permits, taking effect at once. On shrinking, permits already
// taken stay taken and new ones are refused until the count is below max. max must be at
// least 1, otherwise the error wraps ErrInvalidConfig. After Close it returns ErrClosed.
func (s *Semaphore) Resize(max int) error {
	if err := checkRange("max", max, 1); err != nil {
		return err
	}
	if s.state.Load()&semClosed != 0 {
		return ErrClosed
	}
	s.max.Store(int64(max))
	return nil
}

// Stats returns the Semaphore's gauges and counters; QueueCapacity, Queued and Detached are
// always 0.
func (s *Semaphore) Stats() Stats {
	return Stats{
		Capacity:      int(s.max.Load()),
		Active:        int(s.state.Load() & semCount),
		LargestActive: int(s.largest.Load()),
		Completed:     s.completed.Load(),
		Rejected:      s.rejected.Load(),
	}
}

// Close refuses new permits (Execute returns ErrClosed, TryAcquire false) and waits until the
// permits taken are released or ctx ends. It returns nil when all were released, a
// *CloseError with the number still held (Running) when ctx ended first, and ErrClosed when
// the Semaphore was already closed.
func (s *Semaphore) Close(ctx context.Context) error {
	if s.state.Or(semClosed)&semClosed != 0 {
		return ErrClosed
	}
	err := pollUntil(ctx, func() bool { return s.state.Load()&semCount == 0 })
	if err != nil {
		return &CloseError{Running: int(s.state.Load() & semCount), Err: err}
	}
	return nil
}
