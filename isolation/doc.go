// Package isolation provides bulkheads: they bound how many calls to one dependency run at
// once, so that a slow or hung dependency cannot take every goroutine of its callers.
//
// A Pool runs each call on one of its worker goroutines, with a bounded queue of waiting calls.
// A full pool and queue rejects at once (ErrRejected). The caller's context covers queue time
// plus run time: a call whose context ends in the queue is dropped and never runs (ErrDropped);
// one whose context ends while its work runs returns at once (ErrDetached) while the work goes
// on with the ended context, keeping its worker until it returns. Hystrix calls this strategy
// THREAD.
//
// A Semaphore is a lock-free permit counter; its Execute runs work on the caller's goroutine,
// with no allocation and no detachment: a work that ignores its context keeps its caller. It
// is also the fallback limiter. Hystrix calls this strategy SEMAPHORE.
//
// Both implement Bulkhead, recover panics in work into a *PanicError, report live Stats, can
// be resized at runtime and are closed with Close.
//
//	pool, err := isolation.NewPool(isolation.PoolConfig{Size: 10, Queue: 5})
//	if err != nil {
//		return err
//	}
//	defer pool.Close(context.Background())
//
//	ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
//	defer cancel()
//	var body []byte
//	var fetchErr error
//	err = pool.Execute(ctx, func(ctx context.Context) {
//		body, fetchErr = fetch(ctx)
//	})
//	switch {
//	case err == nil: // fetch returned: body and fetchErr are set
//	case errors.Is(err, isolation.ErrRejected): // bulkhead full: fail fast, use a fallback
//	case errors.Is(err, context.DeadlineExceeded): // queued too long, or detached
//	}
//
// Read what work produced only when Execute returned nil: after ErrDetached the work is still
// running and may write its results at any time. Work whose results need an owner once its
// caller has gone (a response body to close) runs with ExecuteOwned: after ErrDetached the Pool
// hands them, on the worker and once the work has returned, to an orphaned function, and to
// nobody else; the Pool alone decides which side owns them.
//
// Choices where Hystrix is silent: a call whose context has already ended never starts
// (ErrDropped), also on a Semaphore; the queue is FIFO; a detached work's panic is logged
// through the Pool's slog.Logger, since nobody is left to receive it; Close drains within its
// context's deadline and then reports what it cut off in a *CloseError.
package isolation
