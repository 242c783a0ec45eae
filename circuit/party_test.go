package circuit

import (
	"bytes"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/breaker"
	"github.com/bulwark-go/bulwark/metrics"
)

// party is a Party whose probe gate and status a test sets.
type party struct {
	open   atomic.Bool
	status string
}

func (p *party) MayProbe() bool { return p.open.Load() }
func (p *party) Status() string { return p.status }

func join(t *testing.T, b *Breaker, open bool) (*party, *breaker.Member) {
	t.Helper()
	p := &party{status: "shared state: ok"}
	p.open.Store(open)
	m, err := b.engine().Join(p)
	require.NoError(t, err)
	return p, m
}

func TestJoinOneParty(t *testing.T) {
	r := newRig(t, Config{})
	_, err := r.b.engine().Join(nil)
	require.Error(t, err)
	_, m := join(t, r.b, true)
	_, err = r.b.engine().Join(&party{})
	require.ErrorContains(t, err, "has a party already")
	m.Leave()
	m.Leave()
	join(t, r.b, true) // free again
}

func TestMemberLook(t *testing.T) {
	r := newRig(t, Config{MinRequests: 3, OpenDuration: time.Second, HalfOpenSuccesses: 1})
	_, m := join(t, r.b, true)
	r.run("s f")
	l := m.Look()
	require.Equal(t, Closed, State(l.State))
	require.Equal(t, int64(1), l.Window[metrics.Success])
	require.Equal(t, int64(1), l.Window[metrics.Failure])
	require.Zero(t, l.Closes)
	require.Empty(t, l.LastClose)
	r.run("f =open +1s")
	require.Equal(t, HalfOpen, State(m.Look().State), "time alone turned it half-open")
	r.run("s =closed")
	l = m.Look()
	require.Equal(t, uint64(1), l.Closes)
	require.Equal(t, ReasonProbesSucceeded, Reason(l.LastClose))
	require.Equal(t, metrics.Counts{}, l.Window, "closing cleared the window")
}

func TestMemberOpen(t *testing.T) {
	r := newRig(t, Config{OpenDuration: time.Second, HalfOpenSuccesses: 1})
	_, m := join(t, r.b, true)
	require.True(t, m.Open(m.Look()))
	r.run("=open x")
	require.False(t, m.Open(m.Look()), "already open")
	require.Equal(t, Health{}, r.b.Snapshot().Health, "not a local failure")
	r.run("+1s h =half-open")
	require.False(t, m.Open(m.Look()), "half-open: its own probes decide")
	r.run("rs =closed")
	r.b.SetMode(ForcedClosed)
	require.False(t, m.Open(m.Look()), "forced")
	require.Equal(t, []Reason{Reason(breaker.ReasonFleetOpen), ReasonOpenElapsed, ReasonProbesSucceeded}, r.reasons())
}

// A fleet's decision taken on a Look from before a close must not apply
// after it: the breaker closed by its probes while a sync was in flight
// with the fleet's pre-outage windows, and that sync's verdict reopened it
// in the same millisecond (issue 22).
func TestMemberOpenOnALookFromBeforeTheCloseIsRefused(t *testing.T) {
	r := newRig(t, Config{MinRequests: 1, OpenDuration: time.Second, HalfOpenSuccesses: 1})
	_, m := join(t, r.b, true)
	r.run("f =open +1s =half-open")
	before := m.Look()
	r.run("s =closed")
	require.False(t, m.Open(before), "a verdict from before the close")
	r.run("=closed s")
	require.True(t, m.Open(m.Look()), "a fresh one applies")
}

func TestMemberClose(t *testing.T) {
	r := newRig(t, Config{MinRequests: 2, OpenDuration: time.Second, OpenBackoff: 2})
	_, m := join(t, r.b, true)
	r.run("f f =open")
	require.True(t, m.Close(m.Look()))
	r.run("=closed f =closed") // window cleared
	require.False(t, m.Close(m.Look()), "closed already")
	r.run("f =open +1s h =half-open rf =open")
	require.Equal(t, 2*time.Second, r.b.Snapshot().OpenDuration, "backed off")
	stale := m.Look()
	r.run("+2s =half-open")
	require.False(t, m.Close(stale), "the breaker moved since")
	require.True(t, m.Close(m.Look()))
	require.Equal(t, time.Second, r.b.Snapshot().OpenDuration, "closing reset the backoff")
	l := m.Look()
	require.Equal(t, uint64(2), l.Closes)
	require.Equal(t, Reason(breaker.ReasonFleetClose), Reason(l.LastClose))
}

func TestMemberAfterLeave(t *testing.T) {
	r := newRig(t, Config{MinRequests: 1, OpenDuration: time.Second})
	p, m := join(t, r.b, false)
	require.Equal(t, "shared state: ok", r.b.Snapshot().Shared)
	m.Leave()
	require.False(t, m.Open(m.Look()))
	require.Empty(t, r.b.Snapshot().Shared)
	r.run("f =open +1s s =half-open") // no gate: it probes alone
	require.False(t, p.MayProbe())
	require.False(t, m.Close(m.Look()))
}

func TestProbeGate(t *testing.T) {
	r := newRig(t, Config{MinRequests: 1, OpenDuration: time.Second, HalfOpenSuccesses: 1})
	p, m := join(t, r.b, false)
	r.run("f =open +1s x =half-open x")
	_, err := r.b.Allow()
	require.ErrorIs(t, err, errProbeLimit)
	p.open.Store(true)
	r.run("s =closed")
	m.Leave()
	r.run("f =open +1s s =closed")
}

func TestProbeGateObserveOnly(t *testing.T) {
	r := newRig(t, Config{MinRequests: 1, OpenDuration: time.Second, Mode: ObserveOnly})
	join(t, r.b, false)
	r.run("f =open +1s s s =half-open") // admitted, never probes
}

// Watch kept one function and a second replaced the first, so a fleet and
// a user could not both learn of transitions (issue 23): every observer
// gets every transition, and stop removes only its own.
func TestObserveAddsObservers(t *testing.T) {
	r := newRig(t, Config{MinRequests: 1, OpenDuration: time.Second, HalfOpenSuccesses: 1})
	var first, second []Reason
	stop1 := r.b.Observe(func(tr Transition) { first = append(first, tr.Reason) })
	stop2 := r.b.Observe(func(tr Transition) { second = append(second, tr.Reason) })
	require.NotNil(t, r.b.Observe(nil))
	r.run("f +1s s")
	want := []Reason{ReasonErrorRatio, ReasonOpenElapsed, ReasonProbesSucceeded}
	require.Equal(t, want, first)
	require.Equal(t, want, second)
	stop1()
	stop1()
	r.run("f")
	require.Len(t, first, 3)
	require.Len(t, second, 4)
	stop2()
	r.run("+1s s")
	require.Len(t, second, 4)
	require.Len(t, r.transitions(), 6, "OnTransition still gets them all")
}

// An observer may stop itself, and its panic reaches neither the caller
// nor the observers after it.
func TestObserverStopsItselfAndPanics(t *testing.T) {
	var logs bytes.Buffer
	r := newRig(t, Config{MinRequests: 1, OpenDuration: time.Second, HalfOpenSuccesses: 1})
	r.b.Reconfigure(Config{
		MinRequests:       1,
		OpenDuration:      time.Second,
		HalfOpenSuccesses: 1,
		Logger:            slog.New(slog.NewTextHandler(&logs, nil)),
	})
	var stop func()
	n := 0
	stop = r.b.Observe(func(Transition) { n++; stop() })
	r.b.Observe(func(Transition) { panic("observer bug") })
	var after []Reason
	r.b.Observe(func(tr Transition) { after = append(after, tr.Reason) })
	r.run("f +1s s")
	require.Equal(t, 1, n)
	require.Len(t, after, 3)
	require.Contains(t, logs.String(), "circuit breaker an observer panicked")
}

func TestSharedStatusInSnapshot(t *testing.T) {
	r := newRig(t, Config{})
	require.Empty(t, r.b.Snapshot().Shared)
	p, m := join(t, r.b, true)
	require.Equal(t, "shared state: ok", r.b.Snapshot().Shared)
	p.status = "shared state: degraded (x)"
	require.Equal(t, "shared state: degraded (x)", r.b.Snapshot().Shared)
	m.Leave()
	require.Empty(t, r.b.Snapshot().Shared)
}
