package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/limiter"
	"github.com/bulwark-go/bulwark/metrics"
)

func TestTokenBucketAdmitsExactlyBurstPlusRateTimesT(t *testing.T) {
	for _, tc := range []struct {
		rate  float64
		burst int
		step  time.Duration
		span  time.Duration
	}{
		{rate: 100, burst: 20, step: time.Millisecond, span: 3 * time.Second},
		{rate: 10, burst: 1, step: 4 * time.Millisecond, span: 10 * time.Second},
		{rate: 1000, burst: 50, step: 100 * time.Microsecond, span: time.Second},
	} {
		t.Run(fmt.Sprintf("rate=%v,burst=%d", tc.rate, tc.burst), func(t *testing.T) {
			var clock metrics.ManualClock
			clock.Set(5 * time.Second) // any origin
			b, err := NewTokenBucket(TokenBucketConfig{Rate: tc.rate, Burst: tc.burst, Clock: &clock})
			require.NoError(t, err)
			// step divides the token interval: a call waits at every token.
			start := clock.Now()
			admitted := 0
			for clock.Now()-start <= tc.span {
				// Offer more calls than the bucket can take at each instant.
				for range tc.burst + 2 {
					if b.Admit(context.Background()) == nil {
						admitted++
					}
				}
				elapsed := clock.Now() - start
				want := tc.burst + int(tc.rate*elapsed.Seconds()+1e-9)
				require.Equal(t, want, admitted, "after %v", elapsed)
				clock.Advance(tc.step)
			}
		})
	}
}

func TestTokenBucketRefusalSaysWhenToRetry(t *testing.T) {
	var clock metrics.ManualClock
	b, err := NewTokenBucket(TokenBucketConfig{Rate: 4, Burst: 1, Clock: &clock})
	require.NoError(t, err)
	require.NoError(t, b.Admit(context.Background()))
	err = b.Admit(context.Background())
	require.ErrorIs(t, err, ErrLimited)
	var le *LimitError
	require.ErrorAs(t, err, &le)
	require.Equal(t, 250*time.Millisecond, le.RetryAfter)
	clock.Advance(le.RetryAfter - time.Millisecond)
	require.ErrorIs(t, b.Admit(context.Background()), ErrLimited, "refused before RetryAfter")
	clock.Advance(time.Millisecond)
	require.NoError(t, b.Admit(context.Background()), "admitted at RetryAfter")
}

// TestTokenBucketRateTooLowToCountIsRefused: below about 4.3e-10 tokens a
// second, the interval between two tokens no longer fits the bucket's
// nanosecond arithmetic. Such a rate used to pass Validate, and the bucket
// then admitted every call (burst 1) or none (burst 2). It is refused,
// naming the field; a low rate that fits still admits its burst and then
// refuses, saying when the next token comes.
func TestTokenBucketRateTooLowToCountIsRefused(t *testing.T) {
	for _, c := range []TokenBucketConfig{{Rate: 1e-11}, {Rate: 1e-11, Burst: 2}, {Rate: 1e-9, Burst: 3}, {Rate: 1e12, Burst: 1 << 62}} {
		_, err := NewTokenBucket(c)
		require.ErrorIs(t, err, ErrInvalidConfig, "%+v", c)
		require.ErrorContains(t, err, fmt.Sprintf("TokenBucketConfig.Rate %v with Burst %d takes", c.Rate, c.Burst))
		require.ErrorContains(t, err, "more than MaxFillTime (73 years)")
	}
	var clock metrics.ManualClock
	clock.Set(time.Hour)
	b, err := NewTokenBucket(TokenBucketConfig{Rate: 1e-9, Burst: 2, Clock: &clock}) // a token every 31.7 years
	require.NoError(t, err)
	require.NoError(t, b.Admit(context.Background()))
	require.NoError(t, b.Admit(context.Background()))
	err = b.Admit(context.Background())
	var le *LimitError
	require.ErrorAs(t, err, &le)
	require.Equal(t, time.Duration(1e18), le.RetryAfter)
	clock.Advance(le.RetryAfter)
	require.NoError(t, b.Admit(context.Background()))
	require.ErrorIs(t, b.Admit(context.Background()), ErrLimited)
}

func TestSlidingWindowNeverExceedsLimitInAnyWindow(t *testing.T) {
	for _, buckets := range []int{1, 2, 5} {
		t.Run(fmt.Sprintf("buckets=%d", buckets), func(t *testing.T) {
			const limit = 10
			var clock metrics.ManualClock
			w, err := NewSlidingWindow(SlidingWindowConfig{Limit: limit,
				Window: metrics.Window{Length: time.Second, Buckets: buckets}, Clock: &clock})
			require.NoError(t, err)
			width := time.Second / time.Duration(buckets)
			// Calls at an uneven, bursty pace for 20 s: a burst of 7 every
			// 130 ms, a quiet spell now and then.
			var times []time.Duration
			for i := 0; clock.Now() < 20*time.Second; i++ {
				if i%17 < 12 {
					for range 7 {
						if w.Admit(context.Background()) == nil {
							times = append(times, clock.Now())
						}
					}
				}
				clock.Advance(130 * time.Millisecond)
			}
			require.Greater(t, len(times), 20*limit/2, "the window admits calls at all")
			requireAtMostPerSpan(t, times, limit, 0, 20*time.Second, width)
		})
	}
}

// requireAtMostPerSpan checks that no 1 s span of times (instants of
// admitted calls) starting on a multiple of width in [from, to) holds
// more than limit of them.
func requireAtMostPerSpan(t *testing.T, times []time.Duration, limit int, from, to, width time.Duration) {
	t.Helper()
	for start := from; start < to; start += width {
		n := 0
		for _, at := range times {
			if at >= start && at < start+time.Second {
				n++
			}
		}
		require.LessOrEqual(t, n, limit, "calls in [%v, %v)", start, start+time.Second)
	}
}

// TestSlidingWindowOlderInstantDoesNotReopenTheWindow: an instant older than
// the newest one the window has seen (Execute hands these over when calls
// race: each read the clock before it took the window's lock) counts as
// that newest instant. It used to be counted against the window of its own
// instant, which no longer held the newer sub-window's calls: limit 10
// admitted 10 at 1.001 s, then 10 more at 0.999 s.
func TestSlidingWindowOlderInstantDoesNotReopenTheWindow(t *testing.T) {
	w, err := NewSlidingWindow(SlidingWindowConfig{Limit: 10, Clock: new(metrics.ManualClock)}) // 1 s in 2 × 500 ms
	require.NoError(t, err)
	for i := range 10 {
		require.NoError(t, (*limiter.Window)(w).AdmitAt(1001*time.Millisecond), "call %d", i)
	}
	require.ErrorIs(t, (*limiter.Window)(w).AdmitAt(1001*time.Millisecond), ErrLimited)
	err = (*limiter.Window)(w).AdmitAt(999 * time.Millisecond)
	require.ErrorIs(t, err, ErrLimited, "an older instant finds the window as full as the newest")
	var le *LimitError
	require.ErrorAs(t, err, &le)
	require.Equal(t, 499*time.Millisecond, le.RetryAfter, "counted from the newest instant")
	require.ErrorIs(t, (*limiter.Window)(w).AdmitAt(1999*time.Millisecond), ErrLimited)
	require.NoError(t, (*limiter.Window)(w).AdmitAt(2*time.Second), "the sub-window of 1.001 s left")
}

// TestSlidingWindowNeverExceedsLimitWithInstantsOutOfOrder offers calls at
// instants that run back and forth (each up to 3 sub-windows before the
// newest): no window-length span that starts on a sub-window boundary
// holds more than Limit calls, each counted at the instant the window
// admitted it at, the newest it had seen.
func TestSlidingWindowNeverExceedsLimitWithInstantsOutOfOrder(t *testing.T) {
	for _, buckets := range []int{1, 2, 5} {
		t.Run(fmt.Sprintf("buckets=%d", buckets), func(t *testing.T) {
			const limit = 10
			w, err := NewSlidingWindow(SlidingWindowConfig{Limit: limit,
				Window: metrics.Window{Length: time.Second, Buckets: buckets}, Clock: new(metrics.ManualClock)})
			require.NoError(t, err)
			width := time.Second / time.Duration(buckets)
			rng := rand.New(rand.NewPCG(1, uint64(buckets)))
			var admitted []time.Duration // at the newest instant offered so far
			newest := time.Duration(math.MinInt64)
			for now := time.Duration(0); now < 20*time.Second; now += 7 * time.Millisecond {
				at := now - time.Duration(rng.Int64N(int64(3*width)))
				newest = max(newest, at)
				if (*limiter.Window)(w).AdmitAt(at) == nil {
					admitted = append(admitted, newest)
				}
			}
			require.Greater(t, len(admitted), 20*limit/2, "the window admits calls at all")
			requireAtMostPerSpan(t, admitted, limit, -3*width, 20*time.Second, width)
		})
	}
}

// TestSlidingWindowConcurrentCallsNeverExceedLimit: 64 goroutines read a
// clock that they move on, then call AdmitAt, so that their instants reach
// the window out of order. Every instant lies in [0, end], so at most Limit
// calls per window-length span from 0 can have been admitted. Before
// older instants counted as the newest, this admitted about 10 to 30%
// more.
func TestSlidingWindowConcurrentCallsNeverExceedLimit(t *testing.T) {
	const (
		limit      = 10
		length     = 100 * time.Millisecond
		goroutines = 64
		calls      = 500 // per goroutine
	)
	var clock metrics.ManualClock
	w, err := NewSlidingWindow(SlidingWindowConfig{Limit: limit, Window: metrics.Window{Length: length, Buckets: 2}, Clock: &clock})
	require.NoError(t, err)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for i := range calls {
				if (*limiter.Window)(w).AdmitAt(clock.Now()) == nil {
					admitted.Add(1)
				}
				if i%4 == 0 {
					clock.Advance(length / 200)
				}
			}
		})
	}
	wg.Wait()
	windows := int64(clock.Now()/length) + 1
	require.Greater(t, windows, int64(10), "the run spans many windows")
	require.LessOrEqual(t, admitted.Load(), limit*windows, "admitted over %d windows of %v", windows, length)
	require.Greater(t, admitted.Load(), limit*windows/2, "the window admits calls at all")
}

func TestSlidingWindowRefusalSaysWhenOldestSubWindowLeaves(t *testing.T) {
	var clock metrics.ManualClock
	w, err := NewSlidingWindow(SlidingWindowConfig{Limit: 2, Clock: &clock}) // 1 s in 2 × 500 ms
	require.NoError(t, err)
	clock.Set(100 * time.Millisecond)
	require.NoError(t, w.Admit(context.Background()))
	clock.Set(600 * time.Millisecond)
	require.NoError(t, w.Admit(context.Background()))
	err = w.Admit(context.Background())
	var le *LimitError
	require.ErrorAs(t, err, &le)
	require.Equal(t, 400*time.Millisecond, le.RetryAfter)
	clock.Advance(le.RetryAfter)
	require.NoError(t, w.Admit(context.Background()), "the first sub-window left")
	require.ErrorIs(t, w.Admit(context.Background()), ErrLimited)
}

func TestPacerSpacesSlotsEvenly(t *testing.T) {
	var clock metrics.ManualClock
	p, err := NewPacer(PacerConfig{Interval: 10 * time.Millisecond, MaxWait: 55 * time.Millisecond, Clock: &clock})
	require.NoError(t, err)
	var slots []time.Duration
	refused := 0
	for range 200 {
		// Three calls arrive every 12 ms: more than the pacer's rate.
		for range 3 {
			wait, err := p.reserve(clock.Now())
			if err != nil {
				require.ErrorIs(t, err, ErrLimited)
				refused++
				continue
			}
			require.LessOrEqual(t, wait, 55*time.Millisecond)
			slots = append(slots, clock.Now()+wait)
		}
		clock.Advance(12 * time.Millisecond)
	}
	require.Positive(t, refused)
	for i := 1; i < len(slots); i++ {
		gap := slots[i] - slots[i-1]
		require.InDelta(t, float64(10*time.Millisecond), float64(gap), float64(time.Millisecond), "gap %d", i)
	}
}

// TestPacerWaitsForItsSlotAndHonoursCtx, on a manual clock that the
// pacer's Sleep moves: each call waits exactly until its slot; a call whose
// ctx has ended takes no slot; one whose ctx ends while it waits keeps its
// slot used.
func TestPacerWaitsForItsSlotAndHonoursCtx(t *testing.T) {
	var clock metrics.ManualClock
	var slept []time.Duration
	var during func() // called during each wait
	p, err := NewPacer(PacerConfig{Interval: 200 * time.Millisecond, MaxWait: time.Minute, Clock: &clock,
		Sleep: func(ctx context.Context, d time.Duration) error {
			slept = append(slept, d)
			if during != nil {
				during()
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			clock.Advance(d)
			return nil
		}})
	require.NoError(t, err)
	require.NoError(t, p.Admit(context.Background()), "the first call goes at once")
	require.Empty(t, slept)
	require.NoError(t, p.Admit(context.Background()))
	require.Equal(t, []time.Duration{200 * time.Millisecond}, slept, "the second call waited for its slot")

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, p.Admit(ended), context.Canceled)
	require.Len(t, slept, 1, "a call whose ctx has ended does not wait")
	require.NoError(t, p.Admit(context.Background()))
	require.Equal(t, 200*time.Millisecond, slept[1], "and took no slot: the next call has the one after the second's")

	clock.Advance(50 * time.Millisecond)
	leaving, leave := context.WithCancel(context.Background())
	during = leave
	require.ErrorIs(t, p.Admit(leaving), context.Canceled, "the ctx ended during the wait")
	require.Equal(t, 150*time.Millisecond, slept[2], "it had the slot at 600 ms")
	wait, err := p.reserve(clock.Now())
	require.NoError(t, err)
	require.Equal(t, 350*time.Millisecond, wait, "which stays used: the next slot is at 800 ms")
}

// TestPacerRefusesEndedCtxWhenItsSlotIsNow: once the previous wait overran
// its slot (a timer fired late on a loaded machine), the next call's slot
// is now, and Admit used to admit it without looking at its ctx, which had
// ended. It returns ctx's error, and the call takes no slot.
func TestPacerRefusesEndedCtxWhenItsSlotIsNow(t *testing.T) {
	var clock metrics.ManualClock
	p, err := NewPacer(PacerConfig{Interval: 200 * time.Millisecond, MaxWait: time.Minute, Clock: &clock})
	require.NoError(t, err)
	require.NoError(t, p.Admit(context.Background()))
	clock.Advance(time.Second) // past the next slot: the next call waits 0
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, p.Admit(ctx), context.Canceled)
	wait, err := p.reserve(clock.Now())
	require.NoError(t, err)
	require.Zero(t, wait, "the refused call took no slot")
}

// TestPacerDefaultSleepEndsWithCtx: the default Sleep, a timer, returns
// ctx's error when ctx ends during a wait of an hour.
func TestPacerDefaultSleepEndsWithCtx(t *testing.T) {
	p, err := NewPacer(PacerConfig{Interval: time.Hour, MaxWait: 2 * time.Hour})
	require.NoError(t, err)
	require.NoError(t, p.Admit(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, p.Admit(ctx), context.DeadlineExceeded)
}

func TestWarmUpRisesFromColdToFullRate(t *testing.T) {
	var clock metrics.ManualClock
	w, err := NewWarmUp(WarmUpConfig{Rate: 100, Burst: 1, ColdFactor: 0.25, Period: 10 * time.Second, Clock: &clock})
	require.NoError(t, err)
	count := func(d time.Duration) int { // calls admitted over d, offered every 1 ms
		n := 0
		for end := clock.Now() + d; clock.Now() < end; clock.Advance(time.Millisecond) {
			if w.Admit(context.Background()) == nil {
				n++
			}
		}
		return n
	}
	first := count(time.Second) // rate 25..32.5/s
	require.InDelta(t, 29, first, 2)
	clock.Advance(9 * time.Second) // idle for less than IdleAfter (10 s)
	warm := count(time.Second)
	require.InDelta(t, 100, warm, 2, "full rate after Period")
	clock.Advance(10 * time.Second) // idle: cold again
	require.InDelta(t, 29, count(time.Second), 2, "cold again after IdleAfter")
}

// The engine of each limiter that never waits decides at the instant its
// caller hands it (AdmitAt, which a command group calls with its call's
// clock reading) as Admit decides at its clock's reading.
func TestAdmitAtDecidesAsAdmitAtThatInstant(t *testing.T) {
	for name, build := range map[string]func(metrics.Clock) (Limiter, limiter.Clocked, error){
		"TokenBucket": func(c metrics.Clock) (Limiter, limiter.Clocked, error) {
			b, err := NewTokenBucket(TokenBucketConfig{Rate: 3, Burst: 2, Clock: c})
			return b, (*limiter.Bucket)(b), err
		},
		"SlidingWindow": func(c metrics.Clock) (Limiter, limiter.Clocked, error) {
			w, err := NewSlidingWindow(SlidingWindowConfig{Limit: 3, Clock: c})
			return w, (*limiter.Window)(w), err
		},
		"WarmUp": func(c metrics.Clock) (Limiter, limiter.Clocked, error) {
			w, err := NewWarmUp(WarmUpConfig{Rate: 4, Burst: 2, ColdFactor: 0.5, Period: time.Second, Clock: c})
			return w, (*limiter.WarmUp)(w), err
		},
	} {
		t.Run(name, func(t *testing.T) {
			// byAdmitAt's clock stays at 0: if AdmitAt read it instead of
			// taking now, its answers would differ from byAdmit's.
			var clock, unused metrics.ManualClock
			byAdmit, engine, err := build(&clock)
			require.NoError(t, err)
			_, byAdmitAt, err := build(&unused)
			require.NoError(t, err)
			require.Same(t, &clock, engine.Clock(), "Clock returns the configured clock")
			admitted := 0
			for i := range 200 {
				now := time.Duration(i) * 37 * time.Millisecond
				clock.Set(now)
				want := byAdmit.Admit(context.Background())
				got := byAdmitAt.AdmitAt(now)
				require.Equal(t, want, got, "call %d at %v", i, now)
				if got == nil {
					admitted++
				}
			}
			require.Positive(t, admitted)
			require.Less(t, admitted, 200, "the limit refused some calls")
		})
	}
}

func TestPerKeyBoundsKeysWithOneMillionDistinctKeys(t *testing.T) {
	const maxKeys = 1000
	var clock metrics.ManualClock
	p, err := NewPerKey(PerKeyConfig{MaxKeys: maxKeys, New: func(string) (Limiter, error) {
		return NewTokenBucket(TokenBucketConfig{Rate: 1, Burst: 1, Clock: &clock})
	}})
	require.NoError(t, err)
	ctx := context.Background()
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for i := range 10 * maxKeys { // reach the bound, then measure
		require.NoError(t, p.AdmitKey(ctx, fmt.Sprint("warm", i)))
	}
	before := heap()
	for i := range 1_000_000 {
		require.NoError(t, p.AdmitKey(ctx, fmt.Sprint("caller-", i)))
	}
	after := heap()
	require.Equal(t, maxKeys, p.Len())
	require.EqualValues(t, 1_000_000+9*maxKeys, p.Evictions())
	require.Less(t, int64(after)-int64(before), int64(1<<20), "heap grew %d bytes over 1 M keys", int64(after)-int64(before))

	// A key's own quota holds while it stays in the LRU.
	require.NoError(t, p.AdmitKey(ctx, "hot"))
	require.ErrorIs(t, p.AdmitKey(ctx, "hot"), ErrLimited)
}

func TestPerKeyPassesOnNewsError(t *testing.T) {
	boom := errors.New("boom")
	p, err := NewPerKey(PerKeyConfig{New: func(string) (Limiter, error) { return nil, boom }})
	require.NoError(t, err)
	err = p.AdmitKey(context.Background(), "k")
	require.ErrorIs(t, err, boom)
	require.NotErrorIs(t, err, ErrLimited)
	require.Zero(t, p.Len())
}

func TestConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		err   error
		field string
	}{
		{TokenBucketConfig{}.Validate(), "TokenBucketConfig.Rate 0"},
		{TokenBucketConfig{Rate: 1, Burst: -1}.Validate(), "TokenBucketConfig.Burst -1"},
		{SlidingWindowConfig{}.Validate(), "SlidingWindowConfig.Limit 0"},
		{SlidingWindowConfig{Limit: 1, Window: metrics.Window{Length: time.Second, Buckets: 3}}.Validate(), "SlidingWindowConfig.Window {Length: 1s, Buckets: 3}"},
		{PacerConfig{}.Validate(), "PacerConfig.Interval 0s"},
		{PacerConfig{Interval: 1, MaxWait: -1}.Validate(), "PacerConfig.MaxWait -1ns"},
		{WarmUpConfig{Rate: 1}.Validate(), "WarmUpConfig.Period 0s"},
		{WarmUpConfig{Rate: 1, Period: 1, ColdFactor: 2}.Validate(), "WarmUpConfig.ColdFactor 2"},
		{WarmUpConfig{Rate: 1, Period: 1, IdleAfter: -1}.Validate(), "WarmUpConfig.IdleAfter -1ns"},
		{PerKeyConfig{}.Validate(), "PerKeyConfig.New"},
		{PerKeyConfig{New: func(string) (Limiter, error) { return nil, nil }, MaxKeys: -1}.Validate(), "PerKeyConfig.MaxKeys -1"},
	} {
		require.ErrorIs(t, tc.err, ErrInvalidConfig, tc.field)
		require.ErrorContains(t, tc.err, tc.field)
	}
}
