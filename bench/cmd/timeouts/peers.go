package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/afex/hystrix-go/hystrix"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/bulkhead"
	fstimeout "github.com/failsafe-go/failsafe-go/timeout"
)

func peerSubjects() []subject {
	return []subject{hystrixSubject(), failsafeSubject()}
}

// hystrixSubject runs work through hystrix-go's DoC with MaxConcurrentRequests as the bulkhead;
// its breaker is configured never to trip. hystrix-go keeps every command in a global map and has
// no way to stop one, so each instance is a new command name.
func hystrixSubject() subject {
	var seq atomic.Int64
	return subject{name: "hystrix-go", open: func(limit int, to time.Duration) (instance, error) {
		name := fmt.Sprintf("timeouts-%d", seq.Add(1))
		hystrix.ConfigureCommand(name, hystrix.CommandConfig{
			Timeout:                int(to / time.Millisecond),
			MaxConcurrentRequests:  limit,
			RequestVolumeThreshold: 1 << 30,
		})
		return instance{
			call: func(ctx context.Context, work func(context.Context)) error {
				return hystrix.DoC(ctx, name, func(ctx context.Context) error {
					work(ctx)
					return nil
				}, nil)
			},
			classify: func(err error) string {
				switch {
				case err == nil:
					return outOK
				case errorsIs(err, hystrix.ErrTimeout):
					return outTimeout
				case errorsIs(err, hystrix.ErrMaxConcurrency):
					return outRejected
				}
				return outOther
			},
		}, nil
	}}
}

// failsafeSubject composes failsafe-go's bulkhead (no wait: full means rejected) and timeout.
func failsafeSubject() subject {
	return subject{name: "failsafe-go", open: func(limit int, to time.Duration) (instance, error) {
		exec := failsafe.With[any](bulkhead.New[any](uint(limit)), fstimeout.New[any](to))
		return instance{
			call: func(ctx context.Context, work func(context.Context)) error {
				return exec.WithContext(ctx).RunWithExecution(func(e failsafe.Execution[any]) error {
					work(e.Context())
					return nil
				})
			},
			classify: func(err error) string {
				switch {
				case err == nil:
					return outOK
				case errorsIs(err, fstimeout.ErrExceeded):
					return outTimeout
				case errorsIs(err, bulkhead.ErrFull):
					return outRejected
				}
				return outOther
			},
		}, nil
	}}
}
