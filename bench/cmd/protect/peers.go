package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/afex/hystrix-go/hystrix"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/fallback"
	fstimeout "github.com/failsafe-go/failsafe-go/timeout"
)

func peerProtections() []func() protection {
	return []func() protection{noProtection, hystrixProtection, failsafeProtection}
}

// noProtection gives each call the timeout and nothing else: no bulkhead, no breaker, no fallback.
func noProtection() protection {
	return protection{name: "none (timeouts only)", wrap: func(_ string, do func(context.Context) error) (call, error) {
		return func(ctx context.Context) answer {
			ctx, cancel := context.WithTimeout(ctx, callTimeout)
			defer cancel()
			if err := do(ctx); err != nil {
				return answer{reason: classifyCtx(err), err: err}
			}
			return answer{}
		}, nil
	}}
}

// hystrixProtection: one hystrix-go command per endpoint with the same limits as the others. The
// run gets its own context deadline because hystrix-go does not cancel the run's context at its
// timeout (it only stops waiting for it).
func hystrixProtection() protection {
	var seq atomic.Int64
	run := seq.Add(1)
	return protection{name: "hystrix-go", wrap: func(endpoint string, do func(context.Context) error) (call, error) {
		name := fmt.Sprintf("protect-%d-%s", run, endpoint)
		hystrix.ConfigureCommand(name, hystrix.CommandConfig{
			Timeout:                int(callTimeout.Milliseconds()),
			MaxConcurrentRequests:  bulkheadSize,
			RequestVolumeThreshold: minRequests,
			ErrorPercentThreshold:  int(failureRatio * 100),
			SleepWindow:            int(openDuration.Milliseconds()),
		})
		return func(ctx context.Context) answer {
			var a answer
			err := hystrix.DoC(ctx, name, func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, callTimeout)
				defer cancel()
				return do(ctx)
			}, func(_ context.Context, err error) error {
				a = answer{fallback: true, reason: classifyHystrix(err)}
				return nil
			})
			if err != nil {
				return answer{reason: classifyHystrix(err), err: err}
			}
			return a
		}, nil
	}}
}

func classifyHystrix(err error) string {
	switch {
	case errors.Is(err, hystrix.ErrCircuitOpen):
		return reasonShortCircuit
	case errors.Is(err, hystrix.ErrMaxConcurrency):
		return reasonRejected
	case errors.Is(err, hystrix.ErrTimeout):
		return reasonTimeout
	}
	return classifyCtx(err)
}

// failsafeProtection composes fallback, bulkhead, circuit breaker (time-based failure rate) and
// timeout per endpoint. The bulkhead sits outside the breaker so that its rejections are not
// counted as the dependency's failures. Half-open closes after halfOpenSuccesses successes and
// reopens on any failure, as bulwark's default does (without a success threshold, failsafe-go's
// time-based breaker lets minRequests probes through before it decides).
func failsafeProtection() protection {
	return protection{name: "failsafe-go", wrap: func(_ string, do func(context.Context) error) (call, error) {
		fb := fallback.NewWithFunc(func(e failsafe.Execution[answer]) (answer, error) {
			return answer{fallback: true, reason: classifyFailsafe(e.LastError())}, nil
		})
		cb := circuitbreaker.NewBuilder[answer]().
			WithFailureRateThreshold(failureRatio, minRequests, breakerWindow).
			WithDelay(openDuration).
			WithSuccessThreshold(halfOpenSuccesses).
			Build()
		exec := failsafe.With[answer](fb, bulkhead.New[answer](bulkheadSize), cb, fstimeout.New[answer](callTimeout))
		return func(ctx context.Context) answer {
			a, err := exec.WithContext(ctx).GetWithExecution(func(e failsafe.Execution[answer]) (answer, error) {
				return answer{}, do(e.Context())
			})
			if err != nil {
				return answer{reason: classifyFailsafe(err), err: err}
			}
			return a
		}, nil
	}}
}

func classifyFailsafe(err error) string {
	switch {
	case errors.Is(err, circuitbreaker.ErrOpen):
		return reasonShortCircuit
	case errors.Is(err, bulkhead.ErrFull):
		return reasonRejected
	case errors.Is(err, fstimeout.ErrExceeded):
		return reasonTimeout
	}
	return classifyCtx(err)
}
