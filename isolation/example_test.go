package isolation_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bulwark-go/bulwark/isolation"
)

func ExamplePool() {
	pool, err := isolation.NewPool(isolation.PoolConfig{Size: 4, Queue: 8})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var sum int
	err = pool.Execute(ctx, func(ctx context.Context) {
		for i := 1; i <= 10; i++ {
			sum += i
		}
	})
	if err != nil { // ErrRejected, ErrDropped, ErrDetached, *PanicError, ErrClosed
		fmt.Println(err)
		return
	}
	fmt.Println("sum:", sum) // safe to read: Execute returned nil, so the work has returned
	s := pool.Stats()
	fmt.Println(s.Capacity, s.QueueCapacity, s.Completed)
	// Output:
	// sum: 55
	// 4 8 1
}

// A work that ignores its context is detached when the caller gives up (here by cancelling,
// the same happens at a deadline): the caller gets ErrDetached and the context's error at
// once, while the work keeps its worker until it returns.
func ExamplePool_Execute_detached() {
	pool, err := isolation.NewPool(isolation.PoolConfig{Size: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	go func() {
		<-started
		cancel() // the caller gives up while the work runs
	}()
	err = pool.Execute(ctx, func(context.Context) {
		close(started)
		time.Sleep(200 * time.Millisecond) // a hung dependency that ignores ctx
	})
	fmt.Println(errors.Is(err, isolation.ErrDetached), errors.Is(err, context.Canceled))
	fmt.Println("detached:", pool.Stats().Detached)

	// The slot is still taken, and there is no queue: the next call is refused at once.
	err = pool.Execute(context.Background(), func(context.Context) {})
	fmt.Println(errors.Is(err, isolation.ErrRejected))

	fmt.Println(pool.Close(context.Background())) // waits for the detached work
	// Output:
	// true true
	// detached: 1
	// true
	// <nil>
}

// Work whose result holds a resource (a response body, a file) needs an owner when its caller
// gives up: with ExecuteOwned the Pool hands the result to orphaned, on the worker, once the
// work has returned, and to nobody else. After a nil return the result is the caller's.
func ExamplePool_ExecuteOwned() {
	pool, err := isolation.NewPool(isolation.PoolConfig{Size: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close(context.Background())

	ctx, cancel := context.WithCancel(context.Background())
	started, release, closed := make(chan struct{}), make(chan struct{}), make(chan string, 1)
	go func() {
		<-started
		cancel() // the caller gives up while the work runs
	}()
	var body string // what the work produces: a resource someone must close
	err = pool.ExecuteOwned(ctx, func(context.Context) {
		close(started)
		<-release // a slow dependency
		body = "response body"
	}, func() {
		closed <- "orphaned closes the " + body // the caller is gone: the result is orphaned's
	})
	fmt.Println(errors.Is(err, isolation.ErrDetached))
	close(release)
	fmt.Println(<-closed)
	// Output:
	// true
	// orphaned closes the response body
}

func ExampleSemaphore() {
	sem, err := isolation.NewSemaphore(2)
	if err != nil {
		fmt.Println(err)
		return
	}
	err = sem.Execute(context.Background(), func(ctx context.Context) {
		fmt.Println("runs on the caller's goroutine")
	})
	fmt.Println(err)

	err = sem.Execute(context.Background(), func(context.Context) { panic("bug") })
	var pe *isolation.PanicError
	fmt.Println(errors.As(err, &pe), pe.Value)
	// Output:
	// runs on the caller's goroutine
	// <nil>
	// true bug
}

// The fallback limiter is a Semaphore of its own: fallbacks beyond the limit are refused
// instead of piling up.
func ExampleSemaphore_fallbackLimiter() {
	fallbacks, err := isolation.NewSemaphore(0) // Hystrix's default: 10 at once
	if err != nil {
		fmt.Println(err)
		return
	}
	fallback := func() (string, error) {
		if !fallbacks.TryAcquire() {
			return "", errors.New("fallback rejected")
		}
		defer fallbacks.Release()
		return "cached value", nil
	}
	fmt.Println(fallback())
	fmt.Println(fallbacks.Stats().Capacity)
	// Output:
	// cached value <nil>
	// 10
}

// Two pools share one set of workers: each keeps its own size, queue and
// admission, and neither keeps a goroutine of its own while it is idle.
// Close the pools first, then the workers.
func ExampleWorkers() {
	workers, err := isolation.NewWorkers(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer workers.Close(context.Background())
	for _, size := range []int{2, 8} {
		pool, err := isolation.NewPool(isolation.PoolConfig{Size: size, Workers: workers})
		if err != nil {
			fmt.Println(err)
			return
		}
		ran := false
		if err := pool.Execute(context.Background(), func(context.Context) { ran = true }); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(pool.Stats().Capacity, ran)
		if err := pool.Close(context.Background()); err != nil {
			fmt.Println(err)
		}
	}
	// Output:
	// 2 true
	// 8 true
}
