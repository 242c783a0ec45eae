package healthcheck_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/circuit/healthcheck"
	"github.com/bulwark-go/bulwark/internal/logtest"
	"github.com/bulwark-go/bulwark/metrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errDown = errors.New("dependency down")

// probe is a health check whose answer the test sets.
type probe struct {
	healthy atomic.Bool
	calls   atomic.Int64
	running atomic.Int64
	overlap atomic.Bool
}

func (p *probe) check(ctx context.Context) error {
	if p.running.Add(1) > 1 {
		p.overlap.Store(true)
	}
	defer p.running.Add(-1)
	p.calls.Add(1)
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("no deadline")
	}
	if p.healthy.Load() {
		return nil
	}
	return errDown
}

// rig is a breaker on a manual clock (4 calls judge, 1 min open, 2 probe
// successes close) that records the reasons of its transitions.
type rig struct {
	t     *testing.T
	b     *circuit.Breaker
	clock *metrics.ManualClock

	mu      sync.Mutex
	reasons []circuit.Reason
	at      []time.Duration
}

func newRig(t *testing.T, logger *slog.Logger) *rig {
	t.Helper()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &rig{t: t, clock: new(metrics.ManualClock)}
	b, err := circuit.New(circuit.Config{
		Name:              "db",
		MinRequests:       4,
		OpenDuration:      time.Minute,
		HalfOpenSuccesses: 2,
		Clock:             r.clock,
		Logger:            logger,
		OnTransition: func(tr circuit.Transition) {
			r.mu.Lock()
			r.reasons = append(r.reasons, tr.Reason)
			r.at = append(r.at, tr.At)
			r.mu.Unlock()
		},
	})
	require.NoError(t, err)
	r.b = b
	return r
}

// start starts a checker of cfg on the rig's breaker, stopped at the end
// of the test.
func (r *rig) start(cfg healthcheck.Config) *healthcheck.Checker {
	r.t.Helper()
	c, err := healthcheck.Start(r.b, cfg)
	require.NoError(r.t, err)
	r.t.Cleanup(c.Stop)
	return c
}

// record makes n calls with outcome o, each admitted.
func (r *rig) record(n int, o metrics.Event) {
	r.t.Helper()
	for range n {
		p, err := r.b.Allow()
		require.NoError(r.t, err)
		p.Record(o, time.Millisecond)
	}
}

// trip opens the breaker with 4 failures.
func (r *rig) trip() {
	r.t.Helper()
	r.record(4, metrics.Failure)
	require.Equal(r.t, circuit.Open, r.b.State())
}

func (r *rig) got() []circuit.Reason {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]circuit.Reason(nil), r.reasons...)
}

func manual(check func(context.Context) error) healthcheck.Config {
	return healthcheck.Config{Check: check, Interval: healthcheck.Manual}
}

func TestCheckMovesToHalfOpen(t *testing.T) {
	p := new(probe)
	r := newRig(t, nil)
	c := r.start(manual(p.check))
	ctx := context.Background()

	require.ErrorIs(t, c.Check(ctx), healthcheck.ErrSkipped, "closed: nothing to check")
	assert.Zero(t, p.calls.Load())
	assert.Equal(t, "", r.b.Snapshot().HealthCheck, "a skipped check is not a check")

	r.trip()
	r.clock.Advance(500 * time.Millisecond)
	err := c.Check(ctx)
	require.ErrorIs(t, err, errDown)
	require.NotErrorIs(t, err, healthcheck.ErrSkipped)
	assert.Equal(t, circuit.Open, r.b.State())
	assert.Equal(t, "1 check, 1 failed; last failed: dependency down", r.b.Snapshot().HealthCheck)

	p.healthy.Store(true)
	r.clock.Advance(500 * time.Millisecond)
	require.NoError(t, c.Check(ctx))
	require.Equal(t, circuit.HalfOpen, r.b.State())
	r.record(2, metrics.Success)
	require.Equal(t, circuit.Closed, r.b.State())
	assert.Equal(t, []circuit.Reason{circuit.ReasonErrorRatio, healthcheck.Reason, circuit.ReasonProbesSucceeded}, r.got())
	assert.Equal(t, time.Second, r.at[1], "half-open at once, not after the 1 min open duration")
	assert.Equal(t, "2 checks, 1 failed; last passed", r.b.Snapshot().HealthCheck)
}

func TestCheckFailedProbeReopens(t *testing.T) {
	p := new(probe)
	p.healthy.Store(true)
	r := newRig(t, nil)
	c := r.start(manual(p.check))
	r.trip()
	require.NoError(t, c.Check(context.Background()))
	r.record(1, metrics.Failure)
	assert.Equal(t, circuit.Open, r.b.State())
	assert.Equal(t, []circuit.Reason{circuit.ReasonErrorRatio, healthcheck.Reason, circuit.ReasonProbeFailed}, r.got())
}

// The snapshot's line counts the checks and failures so far and tells how
// the last one ended, with its error's text when it has one.
func TestSnapshotHealthCheckLine(t *testing.T) {
	ctx := context.Background()
	errs := []error{errors.New("dial tcp: connection refused"), errors.New(""), nil, errDown}
	next := 0
	r := newRig(t, nil)
	c := r.start(manual(func(context.Context) error { next++; return errs[next-1] }))
	r.trip()
	for _, want := range []string{
		"1 check, 1 failed; last failed: dial tcp: connection refused",
		"2 checks, 2 failed; last failed", // an error without text
		"3 checks, 2 failed; last passed",
	} {
		_ = c.Check(ctx)
		assert.Equal(t, want, r.b.Snapshot().HealthCheck)
	}
	require.Equal(t, circuit.HalfOpen, r.b.State(), "the passing check")
	r.record(1, metrics.Failure)
	require.ErrorIs(t, c.Check(ctx), errDown, "open again")
	assert.Equal(t, "4 checks, 3 failed; last failed: dependency down", r.b.Snapshot().HealthCheck,
		"the counts span openings")
}

func TestCheckSkips(t *testing.T) {
	ctx := context.Background()
	p := new(probe)
	p.healthy.Store(true)
	r := newRig(t, nil)
	c := r.start(manual(p.check))
	r.b.SetMode(circuit.ForcedOpen)
	require.ErrorIs(t, c.Check(ctx), healthcheck.ErrSkipped, "forced open stays open")
	r.b.SetMode(circuit.Normal)
	r.trip()
	r.clock.Advance(time.Minute)
	require.Equal(t, circuit.HalfOpen, r.b.State())
	require.ErrorIs(t, c.Check(ctx), healthcheck.ErrSkipped, "half-open already")
	assert.Zero(t, p.calls.Load())

	r.record(1, metrics.Failure)
	require.Equal(t, circuit.Open, r.b.State())
	c.Stop()
	require.ErrorIs(t, c.Check(ctx), healthcheck.ErrSkipped, "stopped")
	c.Stop() // idempotent
	assert.Equal(t, "", r.b.Snapshot().HealthCheck, "no checker attached")
	r.clock.Advance(2 * time.Minute) // the breaker still works
	r.record(1, metrics.Success)
	assert.Zero(t, p.calls.Load())
}

func TestOneCheckerPerBreaker(t *testing.T) {
	r := newRig(t, nil)
	c := r.start(manual(new(probe).check))
	_, err := healthcheck.Start(r.b, manual(new(probe).check))
	require.ErrorContains(t, err, `breaker "db" has a health checker already`)
	c.Stop()
	p := new(probe)
	p.healthy.Store(true)
	again := r.start(manual(p.check)) // the breaker is free again
	r.trip()
	require.NoError(t, again.Check(context.Background()))
	assert.Equal(t, circuit.HalfOpen, r.b.State())
}

// A check that passes after the breaker left that open state (here: the
// open duration ran out during the check) changes nothing more.
func TestCheckStaleResult(t *testing.T) {
	r := newRig(t, nil)
	c := r.start(manual(func(context.Context) error { r.clock.Advance(time.Minute); return nil }))
	r.trip()
	require.NoError(t, c.Check(context.Background()))
	assert.Equal(t, circuit.HalfOpen, r.b.State())
	assert.Equal(t, []circuit.Reason{circuit.ReasonErrorRatio, circuit.ReasonOpenElapsed}, r.got())
}

func TestCheckNeverConcurrent(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	r := newRig(t, nil)
	c := r.start(manual(func(context.Context) error { close(entered); <-release; return nil }))
	r.trip()
	done := make(chan error)
	go func() { done <- c.Check(context.Background()) }()
	<-entered
	require.ErrorIs(t, c.Check(context.Background()), healthcheck.ErrSkipped)
	close(release)
	require.NoError(t, <-done)
	assert.Equal(t, circuit.HalfOpen, r.b.State())
}

func TestCheckPanicIsAFailure(t *testing.T) {
	var logs logtest.Buffer
	r := newRig(t, slog.New(slog.NewJSONHandler(&logs, nil)))
	c := r.start(healthcheck.Config{Check: func(context.Context) error { panic("check bug") },
		Interval: healthcheck.Manual, Timeout: time.Second})
	r.trip()
	err := c.Check(context.Background())
	require.Error(t, err)
	require.NotErrorIs(t, err, healthcheck.ErrSkipped)
	assert.Contains(t, err.Error(), "panic: check bug")
	assert.Contains(t, logs.String(), "health check panicked")
	assert.Equal(t, "1 check, 1 failed; last failed: panic: check bug", r.b.Snapshot().HealthCheck)
	assert.Equal(t, circuit.Open, r.b.State())
}

func TestStartValidates(t *testing.T) {
	ok := func(context.Context) error { return nil }
	cases := []struct {
		name string
		cfg  healthcheck.Config
		want string
	}{
		{"scheduled", healthcheck.Config{Check: ok, Interval: time.Second}, ""},
		{"manual", healthcheck.Config{Check: ok, Interval: healthcheck.Manual}, ""},
		{"no check", healthcheck.Config{Interval: time.Second}, "Check must be set"},
		{"no interval", healthcheck.Config{Check: ok}, "Interval must be set"},
		{"interval negative", healthcheck.Config{Check: ok, Interval: -time.Second}, "Interval -1s must not be negative"},
		{"timeout negative", healthcheck.Config{Check: ok, Interval: time.Second, Timeout: -1}, "Timeout -1ns must not be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, nil)
			c, err := healthcheck.Start(r.b, tc.cfg)
			if tc.want == "" {
				require.NoError(t, err)
				c.Stop()
				return
			}
			require.ErrorIs(t, err, circuit.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := healthcheck.Start(nil, healthcheck.Config{Check: ok, Interval: time.Second})
	require.ErrorIs(t, err, circuit.ErrInvalidConfig)
}

// The timeout defaults to the interval (1 s with Manual): the check's
// context has that deadline.
func TestTimeoutDefault(t *testing.T) {
	for interval, want := range map[time.Duration]time.Duration{healthcheck.Manual: time.Second, time.Hour: time.Hour} {
		var left time.Duration
		r := newRig(t, nil)
		c := r.start(healthcheck.Config{Interval: interval, Check: func(ctx context.Context) error {
			d, _ := ctx.Deadline()
			left = time.Until(d)
			return nil
		}})
		r.trip()
		require.NoError(t, c.Check(context.Background()))
		assert.InDelta(t, want.Seconds(), left.Seconds(), 0.5, "interval %v", interval)
	}
}

// Real time, generous bounds: the checker runs every interval while open,
// never two at once, turns the breaker half-open when the dependency heals,
// and its goroutine is gone once the breaker is not open.
func TestScheduled(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := new(probe)
	r := newRig(t, nil)
	c, err := healthcheck.Start(r.b, healthcheck.Config{Check: p.check, Interval: 5 * time.Millisecond})
	require.NoError(t, err)
	defer c.Stop()
	r.trip()
	require.Eventually(t, func() bool { return p.calls.Load() >= 3 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, circuit.Open, r.b.State())
	p.healthy.Store(true)
	require.Eventually(t, func() bool { return r.b.State() == circuit.HalfOpen }, 10*time.Second, time.Millisecond)
	// The checker's goroutine reports the transition after applying it:
	// State can show it first.
	require.Eventually(t, func() bool { return len(r.got()) == 2 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, []circuit.Reason{circuit.ReasonErrorRatio, healthcheck.Reason}, r.got())
	require.Eventually(t, checkerGone, 10*time.Second, time.Millisecond, "the goroutine leaves with the open state")
	assert.False(t, p.overlap.Load(), "checks never overlap")

	// It comes back with the next opening, and Stop stops it.
	r.record(1, metrics.Failure)
	require.Equal(t, circuit.Open, r.b.State())
	calls := p.calls.Load()
	require.Eventually(t, func() bool { return p.calls.Load() > calls }, 10*time.Second, time.Millisecond)
	p.healthy.Store(false)
	c.Stop()
	require.Eventually(t, checkerGone, 10*time.Second, time.Millisecond, "the schedule ends with Stop (Stop waits for its wg.Done, the goroutine returns right after)")
	calls = p.calls.Load()
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, calls, p.calls.Load(), "no check after Stop")
}

// A checker started on a breaker that is open already starts its
// schedule then, not at the next opening.
func TestStartOnOpenBreaker(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := new(probe)
	p.healthy.Store(true)
	r := newRig(t, nil)
	r.trip()
	c, err := healthcheck.Start(r.b, healthcheck.Config{Check: p.check, Interval: time.Millisecond})
	require.NoError(t, err)
	defer c.Stop()
	require.Eventually(t, func() bool { return r.b.State() == circuit.HalfOpen }, 10*time.Second, time.Millisecond)
}

// Stop cancels a check in progress and waits for it.
func TestStopCancelsCheck(t *testing.T) {
	defer goleak.VerifyNone(t)
	entered := make(chan struct{})
	var cause atomic.Value
	r := newRig(t, nil)
	c, err := healthcheck.Start(r.b, healthcheck.Config{Interval: time.Millisecond, Timeout: time.Hour,
		Check: func(ctx context.Context) error {
			close(entered)
			<-ctx.Done()
			cause.Store(ctx.Err())
			return ctx.Err()
		}})
	require.NoError(t, err)
	r.trip()
	<-entered
	c.Stop()
	require.Eventually(t, checkerGone, 10*time.Second, time.Millisecond, "the schedule ends with Stop")
	assert.Equal(t, context.Canceled, cause.Load(), "the check's context ended with Stop, not its timeout")
	assert.Equal(t, circuit.Open, r.b.State())
}

// checkerGone reports whether no goroutine runs a checker's schedule.
func checkerGone() bool {
	buf := make([]byte, 1<<20)
	return !bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("(*Checker).loop"))
}
