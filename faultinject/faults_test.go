package faultinject

import (
	"errors"
	"io"
	"math"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidateNamesTheFieldAndValue(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{ErrorShare: 1.5}, "ErrorShare is 1.5"},
		{Config{HangShare: -0.1}, "HangShare is -0.1"},
		{Config{LatencyShare: math.NaN()}, "LatencyShare is NaN"},
		{Config{SlowBodyShare: 2}, "SlowBodyShare is 2"},
		{Config{ErrorShare: 0.6, ResetShare: 0.5}, "HangShare+ErrorShare+ResetShare+EOFShare+ServerErrorShare+DNSShare is 1.1"},
		{Config{ErrorShare: 0.5, DNSShare: 0.75}, "HangShare+ErrorShare+ResetShare+EOFShare+ServerErrorShare+DNSShare is 1.25"},
		{Config{DNSShare: -1}, "DNSShare is -1"},
		{Config{DNSShare: 1, DNS: "nxdomain"}, `DNS is "nxdomain", want "not_found" or "server_failure" (or empty)`},
		{Config{PoolSize: -1}, "PoolSize is -1, want >= 0"},
		{Config{PoolHeld: -1, PoolSize: 4}, "PoolHeld is -1, want 0..PoolSize (4)"},
		{Config{PoolHeld: 1}, "PoolHeld is 1, want 0..PoolSize (0)"},
		{Config{PoolHeld: 5, PoolSize: 4}, "PoolHeld is 5, want 0..PoolSize (4)"},
		{Config{Latency: Fixed(-time.Second)}, "Latency.Min is -1s"},
		{Config{Latency: Uniform(2*time.Second, time.Second)}, "Latency.Max is 1s, want >= Latency.Min (2s)"},
		{Config{Latency: Latency{Mean: time.Second}}, "Latency.Mean is 1s but Latency.Max (its cap) is zero"},
		{Config{Latency: Latency{Mean: -time.Second, Max: time.Second}}, "Latency.Mean is -1s"},
		{Config{LatencyShare: 0.5}, "LatencyShare is 0.5 but Latency is zero"},
		{Config{StatusCode: 404}, "StatusCode is 404"},
		{Config{SlowBodyChunk: -1}, "SlowBodyChunk is -1"},
		{Config{SlowBodyDelay: -time.Millisecond}, "SlowBodyDelay is -1ms"},
		{Config{SlowBodyShare: 0.5}, "SlowBodyShare is 0.5 but SlowBodyDelay is zero"},
	} {
		err := tc.cfg.Validate()
		require.ErrorIs(t, err, ErrInvalidConfig, "%+v", tc.cfg)
		assert.Contains(t, err.Error(), tc.want)
		f, nerr := New(tc.cfg)
		assert.Nil(t, f)
		assert.Equal(t, err, nerr)
	}
	// Shares that add up to 1 in floating point are accepted.
	require.NoError(t, Config{HangShare: 0.1, ErrorShare: 0.2, ServerErrorShare: 0.7}.Validate())
	require.NoError(t, Config{}.Validate())
}

func TestSetRejectsABadConfigAndKeepsTheOldOne(t *testing.T) {
	f := newEnabled(t, Config{ErrorShare: 0.25})
	require.ErrorIs(t, f.Set(Config{ErrorShare: 7}), ErrInvalidConfig)
	assert.Equal(t, Config{ErrorShare: 0.25}, f.Config())
	assert.True(t, f.Enabled())
}

// outcomesOf draws n decisions and counts each outcome.
func outcomesOf(f *Faults, n int) map[outcome]int {
	got := map[outcome]int{}
	for range n {
		d, ok := f.decide()
		if ok {
			got[d.outcome]++
		}
	}
	return got
}

func TestSharesWithinStatisticalBounds(t *testing.T) {
	const n = 10_000
	// The bound is ±3 percentage points; for a share of 0.3 one standard
	// deviation over 10,000 calls is 0.46 points, so a fixed seed that
	// fell outside would mean a broken draw, not bad luck.
	within := func(t *testing.T, name string, count int, share float64) {
		t.Helper()
		got := float64(count) / n
		assert.InDelta(t, share, got, 0.03, "%s: %d of %d", name, count, n)
	}
	for _, seed := range []uint64{1, 42, 2026} {
		f := newEnabled(t, Config{Seed: seed, ErrorShare: 0.3})
		got := outcomesOf(f, n)
		within(t, "error", got[fail], 0.3)
		assert.Equal(t, n, got[fail]+got[pass])

		f = newEnabled(t, Config{Seed: seed, HangShare: 0.1, ErrorShare: 0.2, ResetShare: 0.05, EOFShare: 0.15, ServerErrorShare: 0.2, DNSShare: 0.1})
		got = outcomesOf(f, n)
		within(t, "hang", got[hang], 0.1)
		within(t, "error", got[fail], 0.2)
		within(t, "reset", got[reset], 0.05)
		within(t, "eof", got[eof], 0.15)
		within(t, "server error", got[serverError], 0.2)
		within(t, "dns", got[dnsFailure], 0.1)
		within(t, "pass", got[pass], 0.2)

		f = newEnabled(t, Config{Seed: seed, LatencyShare: 0.4, Latency: Fixed(time.Second), SlowBodyShare: 0.6, SlowBodyDelay: time.Millisecond})
		var delayed, slow int
		for range n {
			d, _ := f.decide()
			if d.latency > 0 {
				delayed++
			}
			if d.slowBody {
				slow++
			}
		}
		within(t, "latency", delayed, 0.4)
		within(t, "slow body", slow, 0.6)
	}
	// Shares of 0 and 1 are exact.
	assert.Equal(t, map[outcome]int{fail: n}, outcomesOf(newEnabled(t, Config{ErrorShare: 1}), n))
	assert.Equal(t, map[outcome]int{pass: n}, outcomesOf(newEnabled(t, Config{}), n))
}

func TestLatencyDistributions(t *testing.T) {
	const n = 10_000
	draws := func(l Latency) (lo, hi, mean time.Duration) {
		f := newEnabled(t, Config{Seed: 7, LatencyShare: 1, Latency: l})
		lo = time.Duration(math.MaxInt64)
		var sum time.Duration
		for range n {
			d, _ := f.decide()
			lo, hi, sum = min(lo, d.latency), max(hi, d.latency), sum+d.latency
		}
		return lo, hi, sum / n
	}
	lo, hi, _ := draws(Fixed(5 * time.Millisecond))
	assert.Equal(t, 5*time.Millisecond, lo)
	assert.Equal(t, 5*time.Millisecond, hi)

	lo, hi, mean := draws(Uniform(10*time.Millisecond, 30*time.Millisecond))
	assert.GreaterOrEqual(t, lo, 10*time.Millisecond)
	assert.LessOrEqual(t, hi, 30*time.Millisecond)
	assert.InDelta(t, 20*time.Millisecond, mean, float64(time.Millisecond))

	// A cap far in the tail leaves the mean at Min+Mean.
	lo, hi, mean = draws(Exponential(10*time.Millisecond, 20*time.Millisecond, time.Hour))
	assert.GreaterOrEqual(t, lo, 10*time.Millisecond)
	assert.InDelta(t, 30*time.Millisecond, mean, float64(2*time.Millisecond))
	assert.Greater(t, hi, 60*time.Millisecond, "an exponential has a tail")

	// A tight cap bounds every draw, and many draws reach it.
	_, hi, mean = draws(Exponential(0, 20*time.Millisecond, 10*time.Millisecond))
	assert.Equal(t, 10*time.Millisecond, hi)
	assert.Less(t, mean, 10*time.Millisecond)
}

// trace is the faults of n calls, for comparing sequences.
func trace(f *Faults, n int) []decision {
	out := make([]decision, n)
	for i := range out {
		out[i], _ = f.decide()
		out[i].cfg = nil
	}
	return out
}

func TestSameSeedSameFaults(t *testing.T) {
	cfg := Config{Seed: 99, HangShare: 0.1, ErrorShare: 0.2, LatencyShare: 0.5,
		Latency: Exponential(time.Millisecond, 5*time.Millisecond, 50*time.Millisecond), SlowBodyShare: 0.3, SlowBodyDelay: time.Millisecond}
	a, b := newEnabled(t, cfg), newEnabled(t, cfg)
	first := trace(a, 1000)
	assert.Equal(t, first, trace(b, 1000))

	// Set restarts the sequence from the seed.
	require.NoError(t, a.Set(cfg))
	assert.Equal(t, first, trace(a, 1000))

	// Disabled calls draw nothing: the sequence resumes where it stopped.
	require.NoError(t, a.Set(cfg))
	assert.Equal(t, first[:10], trace(a, 10))
	a.Disable()
	trace(a, 50)
	a.Enable()
	assert.Equal(t, first[10:20], trace(a, 10))

	cfg.Seed = 100
	assert.NotEqual(t, first, trace(newEnabled(t, cfg), 1000))
}

func TestConcurrentCallsDrawTheSameFaultsAsSerialOnes(t *testing.T) {
	const goroutines, calls = 8, 1000
	cfg := Config{Seed: 5, ErrorShare: 0.3, HangShare: 0.1}
	serial := outcomesOf(newEnabled(t, cfg), goroutines*calls)

	f := newEnabled(t, cfg)
	var mu sync.Mutex
	got := map[outcome]int{}
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			mine := outcomesOf(f, calls)
			mu.Lock()
			defer mu.Unlock()
			for o, c := range mine {
				got[o] += c
			}
		})
	}
	wg.Wait()
	assert.Equal(t, serial, got, "the same draws, shared out differently")
}

func TestSwitchesRaceFreeWithCalls(t *testing.T) {
	f := newEnabled(t, Config{ErrorShare: 0.5})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					f.decide()
				}
			}
		})
	}
	for i := range 200 {
		f.Disable()
		require.NoError(t, f.Set(Config{Seed: uint64(i), ErrorShare: float64(i%10) / 10}))
		f.Enable()
		_ = f.Config()
	}
	close(stop)
	wg.Wait()
}

func TestNilAndZeroFaultsInjectNothing(t *testing.T) {
	var nilFaults *Faults
	_, ok := nilFaults.decide()
	assert.False(t, ok)
	assert.False(t, nilFaults.Enabled())
	assert.Equal(t, Config{}, nilFaults.Config())

	var zero Faults
	zero.Enable()
	_, ok = zero.decide()
	assert.False(t, ok)

	f, err := New(Config{ErrorShare: 1})
	require.NoError(t, err)
	assert.False(t, f.Enabled(), "New returns disabled Faults")
	_, ok = f.decide()
	assert.False(t, ok)
}

func TestErrorMatchesErrInjectedAndItsCause(t *testing.T) {
	cause := errors.New("backend on fire")
	err := error(&Error{Fault: FaultError, Err: cause})
	assert.ErrorIs(t, err, ErrInjected)
	assert.ErrorIs(t, err, cause)
	assert.Equal(t, "faultinject: injected error: backend on fire", err.Error())
	assert.Equal(t, "faultinject: injected error", (&Error{Fault: FaultError}).Error())

	err = &Error{Fault: FaultReset, Err: syscall.ECONNRESET}
	assert.ErrorIs(t, err, syscall.ECONNRESET)
	assert.ErrorIs(t, err, ErrInjected)
	assert.NotErrorIs(t, &Error{Fault: FaultEOF, Err: io.ErrUnexpectedEOF}, io.EOF)
}
