package circuit

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/logtest"
	"github.com/bulwark-go/bulwark/metrics"
)

// Regression (issue 9, item 2): HalfOpenMaxWait used to count the idle time
// between probes, so a healthy dependency called once per OpenDuration
// timed the half-open state out before enough probes had come back, and the
// breaker never closed.
func TestSparseTrafficClosesHalfOpenBreaker(t *testing.T) {
	for _, tc := range []struct {
		name        string
		open, every time.Duration
	}{
		{"defaults, a call every 5s", 0, 5 * time.Second},
		{"OpenDuration 1s, a call a second", time.Second, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{Name: "sparse", OpenDuration: tc.open})
			r.run("20*f =open")
			for i := range defaultHalfOpenSuccesses {
				r.clock.Advance(tc.every)
				require.NoError(t, r.call(metrics.Success, false), "probe %d", i)
			}
			assert.Equal(t, Closed, r.b.State())
			assert.Equal(t, []Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonProbesSucceeded}, r.reasons())
		})
	}
}

// HalfOpenMaxWait still bounds a hung probe: it counts from the probe's
// admission (not from the start of the half-open state), and a result that
// comes after it does not count.
func TestHungProbeTimesOutHalfOpen(t *testing.T) {
	t.Run("one probe", func(t *testing.T) {
		r := newRig(t, Config{MinRequests: 1, OpenDuration: time.Second}) // HalfOpenMaxWait 2 s
		r.run("f +1s s +10s =half-open h +1999ms x =half-open +1ms =open rs =open")
		assert.Equal(t, []Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonHalfOpenTimeout}, r.reasons())
	})
	t.Run("a late result times the state out first", func(t *testing.T) {
		r := newRig(t, Config{MinRequests: 1, OpenDuration: time.Second})
		r.run("f +1s h +2s rs =open")
		assert.Equal(t, []Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonHalfOpenTimeout}, r.reasons())
	})
	t.Run("a counted result gives the probes still out a new wait", func(t *testing.T) {
		r := newRig(t, Config{MinRequests: 1, OpenDuration: time.Second, HalfOpenProbes: 2})
		r.run("f +1s h +500ms h +1s rs +1999ms =half-open +1ms =open")
		assert.Equal(t, []Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonHalfOpenTimeout}, r.reasons())
	})
	t.Run("an ignored probe frees its slot without a new wait", func(t *testing.T) {
		r := newRig(t, Config{MinRequests: 1, OpenDuration: time.Second, HalfOpenProbes: 2})
		r.run("f +1s h +500ms h +1s ri +499ms =half-open +1ms =open")
		assert.Equal(t, []Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonHalfOpenTimeout}, r.reasons())
	})
	t.Run("the last probe back lifts the deadline", func(t *testing.T) {
		r := newRig(t, Config{MinRequests: 1, OpenDuration: time.Second})
		r.run("f +1s h +1s ri +1h =half-open s =half-open")
		assert.Equal(t, []Reason{ReasonErrorRatio, ReasonOpenElapsed}, r.reasons())
	})
}

// records returns the JSON log records written into b so far.
func records(t *testing.T, b *logtest.Buffer) []map[string]any {
	var out []map[string]any
	for line := range strings.Lines(b.String()) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		out = append(out, rec)
	}
	return out
}

// Regression (issue 9, item 7): when one call delivered two transitions and
// OnTransition panicked on the first, the second was neither logged nor
// delivered, and the panic reached the caller.
func TestPanickingOnTransitionStillDeliversAndLogsEveryTransition(t *testing.T) {
	clock := new(metrics.ManualClock)
	var logs logtest.Buffer
	var got []Reason
	b, err := New(Config{
		Name:         "db",
		MinRequests:  1,
		OpenDuration: time.Second,
		Clock:        clock,
		Logger:       slog.New(slog.NewJSONHandler(&logs, nil)),
		OnTransition: func(tr Transition) {
			got = append(got, tr.Reason)
			if tr.Reason == ReasonOpenElapsed {
				panic("observer bug")
			}
		},
	})
	require.NoError(t, err)
	p, err := b.Allow()
	require.NoError(t, err)
	p.Record(metrics.Failure, 0)
	clock.Advance(time.Second)
	// One call, two transitions: open → half-open (due), half-open → closed (forced).
	require.NotPanics(t, func() { b.SetMode(ForcedClosed) })
	assert.Equal(t, []Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonForced}, got)
	assert.Equal(t, Closed, b.State())

	var infos []any
	var errs []map[string]any
	for _, rec := range records(t, &logs) {
		switch rec["level"] {
		case "INFO":
			infos = append(infos, rec["reason"])
		case "ERROR":
			errs = append(errs, rec)
		}
	}
	assert.Equal(t, []any{"error_ratio", "open_elapsed", "forced"}, infos, "every transition is logged")
	require.Len(t, errs, 1, "the panic is logged once")
	assert.Equal(t, "observer bug", errs[0]["panic"])
	assert.Equal(t, "db", errs[0]["breaker"])
	assert.Equal(t, "open_elapsed", errs[0]["reason"])
	assert.Contains(t, errs[0]["stack"], "TestPanickingOnTransitionStillDeliversAndLogsEveryTransition")
}

// Regression (issue 9, items 6 and 7): a panicking OnTransition must leave
// the breaker consistent: no panic reaches the caller, and a probe whose
// Record made the transition leaves no probe slot taken.
func TestPanickingOnTransitionLeavesNoProbeSlotTaken(t *testing.T) {
	clock := new(metrics.ManualClock)
	b, err := New(Config{
		MinRequests:       1,
		OpenDuration:      time.Second,
		HalfOpenSuccesses: 2,
		Clock:             clock,
		Logger:            slog.New(slog.DiscardHandler),
		OnTransition:      func(Transition) { panic("observer bug") },
	})
	require.NoError(t, err)
	call := func(o metrics.Event) {
		t.Helper()
		p, err := b.Allow()
		require.NoError(t, err)
		require.NotPanics(t, func() { p.Record(o, time.Millisecond) })
	}
	call(metrics.Failure) // closed → open
	require.Equal(t, Open, b.State())
	clock.Advance(time.Second)
	call(metrics.Failure) // open → half-open, then the probe fails: half-open → open
	require.Equal(t, Open, b.State())
	assert.Zero(t, b.Snapshot().Probes)
	clock.Advance(time.Second)
	call(metrics.Success) // a probe again: the slot was given back
	assert.Equal(t, HalfOpen, b.State())
	assert.Zero(t, b.Snapshot().Probes)
	call(metrics.Success)
	assert.Equal(t, Closed, b.State())
}

// Regression (issue 9, item 8): leaving ForcedClosed kept the window, so 20
// failures recorded while forced closed made the next failure trip the
// breaker at once, contrary to SetMode's documentation.
func TestLeavingForcedClosedRestartsWithEmptyWindow(t *testing.T) {
	for _, to := range []string{"normal", "observe-only"} {
		t.Run(to, func(t *testing.T) {
			r := newRig(t, base())
			r.run("@forced-closed 20*f h =closed @" + to + " =closed")
			assert.Equal(t, Health{}, r.b.Snapshot().Health, "the window is empty")
			r.run("rf") // admitted while forced closed: stale, not counted
			r.run("f =closed")
			assert.Equal(t, Health{Requests: 1, Failures: 1, ErrorRatio: 1, ErrorBound: 1}, r.b.Snapshot().Health)
			assert.Empty(t, r.transitions(), "the effective state stayed closed")
		})
	}
}
