package alert

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/internal/logtest"
	"github.com/bulwark-go/bulwark/metrics"
)

// alertLog collects the alerts of a group.
type alertLog struct {
	mu     sync.Mutex
	alerts []Alert
}

func (l *alertLog) add(a Alert) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.alerts = append(l.alerts, a)
}

// take returns the alerts collected since the last take.
func (l *alertLog) take() []Alert {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.alerts
	l.alerts = nil
	return out
}

// alertGroup returns a group on a manual clock whose command breaker trips
// on one failure and stays open 5 minutes, watched by a Watcher of cfg
// whose alerts are collected in the log returned. Its ticker runs every
// hour: the tests call Check.
func alertGroup(t *testing.T, cfg Config) (*command.Group, *Watcher, *metrics.ManualClock, *alertLog) {
	t.Helper()
	log := &alertLog{}
	cfg.OnAlert = log.add
	if cfg.Interval == 0 {
		cfg.Interval = time.Hour
	}
	w := newWatcher(t, cfg)
	g, clock := newTestGroup(t, command.GroupConfig{
		Strategy:       command.Semaphore,
		Timeout:        command.NoTimeout,
		CommandBreaker: circuit.Config{MinRequests: 1, OpenDuration: 5 * time.Minute, HalfOpenSuccesses: 1},
		Alerts:         w,
	})
	return g, w, clock, log
}

var errRefused = errors.New("dial tcp 10.0.0.7:443: connection refused")

// TestAlertTiersByOpenDuration: an open breaker fires P3 at 1 minute, P2 at
// 10 and P1 at 30, each once, naming group, command, trip reason, window
// and the errors that tripped it; closing resolves it.
func TestAlertTiersByOpenDuration(t *testing.T) {
	g, w, clock, log := alertGroup(t, Config{})
	dep := failing("dep", errRefused)
	_, err := command.Execute(context.Background(), g, dep)
	require.Error(t, err)
	w.Check()
	clock.Advance(59 * time.Second)
	w.Check()
	require.Empty(t, log.take(), "no alert before the first tier")

	clock.Advance(time.Second)
	w.Check()
	got := log.take()
	require.Len(t, got, 1)
	a := got[0]
	require.Equal(t, Open, a.Kind)
	require.Equal(t, "deps", a.Group)
	require.Equal(t, "dep", a.Command)
	require.Equal(t, "P3", a.Tier)
	require.Equal(t, time.Minute, a.OpenFor)
	require.Equal(t, circuit.ReasonErrorRatio, a.Reason)
	require.Equal(t, int64(1), a.Health.Failures)
	require.Equal(t, 1.0, a.Health.ErrorRatio)
	require.Equal(t, []ErrorSample{{At: 0, Err: errRefused.Error()}}, a.Errors)
	require.Equal(t, "P3", commandSnapshot(t, g, "dep").AlertTier)

	for _, tier := range []struct {
		at   time.Duration
		name string
	}{{10 * time.Minute, "P2"}, {30 * time.Minute, "P1"}} {
		clock.Set(tier.at - time.Second)
		w.Check()
		require.Empty(t, log.take())
		clock.Set(tier.at)
		w.Check()
		got = log.take()
		require.Len(t, got, 1)
		require.Equal(t, tier.name, got[0].Tier)
		require.Equal(t, tier.at, got[0].OpenFor)
		require.Equal(t, []ErrorSample{{At: 0, Err: errRefused.Error()}}, got[0].Errors,
			"the samples that tripped it, not the probes' since")
		// A failed probe meanwhile keeps the outage going.
		_, _ = command.Execute(context.Background(), g, dep)
	}
	w.Check()
	require.Empty(t, log.take(), "each tier fires once")

	clock.Advance(5 * time.Minute)
	_, err = command.Execute(context.Background(), g, succeeding("dep"))
	require.NoError(t, err)
	clock.Advance(time.Minute)
	w.Check()
	got = log.take()
	require.Len(t, got, 1)
	require.Equal(t, Resolved, got[0].Kind)
	require.Equal(t, "P1", got[0].Tier)
	require.Equal(t, 35*time.Minute, got[0].OpenFor, "until it closed, not until the check")
	require.Equal(t, circuit.Closed, got[0].State)
	require.Empty(t, commandSnapshot(t, g, "dep").AlertTier)
}

// TestAlertSkipsToTheHighestTier: a breaker found open for 11 minutes at
// the first check fires P2 only, and an outage that never reached a tier
// resolves silently.
func TestAlertSkipsToTheHighestTier(t *testing.T) {
	g, w, clock, log := alertGroup(t, Config{})
	_, _ = command.Execute(context.Background(), g, failing("dep", errRefused))
	clock.Advance(11 * time.Minute)
	w.Check()
	got := log.take()
	require.Len(t, got, 1)
	require.Equal(t, "P2", got[0].Tier)

	g2, w2, clock2, log2 := alertGroup(t, Config{})
	_, _ = command.Execute(context.Background(), g2, failing("dep", errRefused))
	w2.Check()
	clock2.Advance(5 * time.Minute)
	_, err := command.Execute(context.Background(), g2, succeeding("dep"))
	require.NoError(t, err)
	w2.Check()
	require.Empty(t, log2.take())
}

// TestAlertCustomTiersAndGroupBreaker: configured tiers apply to the
// group's own breaker too (Command ""); the command's breaker, which needs
// 20 calls to judge, stays closed.
func TestAlertCustomTiersAndGroupBreaker(t *testing.T) {
	log := &alertLog{}
	w := newWatcher(t, Config{OnAlert: log.add, Interval: time.Hour, Tiers: []Tier{{"warn", time.Second}}})
	g, clock := newTestGroup(t, command.GroupConfig{
		Strategy: command.Semaphore,
		Breaker:  circuit.Config{MinRequests: 1, OpenDuration: time.Hour},
		Alerts:   w,
	})
	_, _ = command.Execute(context.Background(), g, failing("dep", errRefused))
	clock.Advance(time.Second)
	w.Check()
	got := log.take()
	require.Len(t, got, 1, "the group's breaker only: %+v", got)
	require.Equal(t, "", got[0].Command)
	require.Equal(t, "warn", got[0].Tier)
	require.Equal(t, []ErrorSample{{At: 0, Err: errRefused.Error()}}, got[0].Errors)
	require.Equal(t, "warn", g.Snapshot().AlertTier)
}

// TestDegradedAlarm: one alert when the degraded share rises above 5% of
// the window's calls, none while it stays there, one when it clears.
func TestDegradedAlarm(t *testing.T) {
	g, w, clock, log := alertGroup(t, Config{})
	ok := succeeding("read")
	degraded := degrading("read", errRefused)
	for range 19 {
		_, err := command.Execute(context.Background(), g, ok)
		require.NoError(t, err)
	}
	_, _, err := command.ExecuteInfo(context.Background(), g, degraded)
	require.NoError(t, err)
	w.Check()
	require.Empty(t, log.take(), "1 of 20 is 5%: not above")
	require.False(t, commandSnapshot(t, g, "read").DegradedAlarm)

	_, _ = command.Execute(context.Background(), g, degraded) // 2 of 21
	w.Check()
	got := log.take()
	require.Len(t, got, 1)
	require.Equal(t, Degraded, got[0].Kind)
	require.Equal(t, "read", got[0].Command)
	require.Equal(t, int64(21), got[0].Calls)
	require.InDelta(t, 2.0/21, got[0].DegradedRate, 1e-9)
	require.Len(t, got[0].Errors, 2)
	require.True(t, commandSnapshot(t, g, "read").DegradedAlarm)
	w.Check()
	require.Empty(t, log.take(), "one alert while it stays above")

	clock.Advance(11 * time.Second) // the window empties
	w.Check()
	got = log.take()
	require.Len(t, got, 1)
	require.Equal(t, DegradedCleared, got[0].Kind)
	require.False(t, commandSnapshot(t, g, "read").DegradedAlarm)
}

// TestUnwatchResolvesWhatStillFires: closing a group whose breaker alert
// and degraded alarm still fire ends both, marked Unwatched, so a receiver
// does not keep a closed group's alerts firing; the degraded alarm carries
// the first tier, as its severity.
func TestUnwatchResolvesWhatStillFires(t *testing.T) {
	// A first tier within the 10 s window, so the degraded alarm still fires at the close.
	g, w, clock, log := alertGroup(t, Config{Tiers: []Tier{{"page", 5 * time.Second}}})
	for range 19 {
		_, err := command.Execute(context.Background(), g, succeeding("read"))
		require.NoError(t, err)
	}
	for range 2 {
		_, _, err := command.ExecuteInfo(context.Background(), g, degrading("read", errRefused))
		require.NoError(t, err)
	}
	_, err := command.Execute(context.Background(), g, failing("dep", errRefused))
	require.Error(t, err)
	w.Check()
	got := log.take()
	require.Len(t, got, 1)
	require.Equal(t, Degraded, got[0].Kind)
	require.Equal(t, "page", got[0].Tier, "the first tier")
	clock.Advance(5 * time.Second)
	w.Check()
	got = log.take()
	require.Len(t, got, 1)
	require.Equal(t, Open, got[0].Kind)
	clock.Advance(2 * time.Second) // unseen: no Check after it

	require.NoError(t, g.Close(context.Background()))
	got = log.take()
	require.Len(t, got, 2, "the outage and the degraded alarm")
	require.Equal(t, Alert{Kind: Resolved, Group: "deps", Command: "dep", Tier: "page", OpenFor: 5 * time.Second, State: circuit.Open,
		Reason: circuit.ReasonErrorRatio, Health: got[0].Health, Errors: []ErrorSample{{At: 0, Err: errRefused.Error()}}, Unwatched: true}, got[0])
	require.Equal(t, "no action: dependency deps (command dep) is no longer watched (its group closed); "+
		"its breaker was open for at least 5 s (reached page), reason error_ratio", got[0].Action())
	require.Equal(t, DegradedCleared, got[1].Kind)
	require.Equal(t, "read", got[1].Command)
	require.Equal(t, "page", got[1].Tier)
	require.True(t, got[1].Unwatched)
	require.Equal(t, "no action: dependency deps (command read) is no longer watched (its group closed) while degraded", got[1].Action())
	require.Empty(t, log.take())
}

// TestDegradedAlarmNeedsMinCalls: below DegradedMinCalls no alarm.
func TestDegradedAlarmNeedsMinCalls(t *testing.T) {
	g, w, _, log := alertGroup(t, Config{DegradedMinCalls: 3})
	degraded := degrading("read", errRefused)
	for range 2 {
		_, _ = command.Execute(context.Background(), g, degraded)
	}
	w.Check()
	require.Empty(t, log.take())
}

// TestAlertErrorSamplesBounded: samples keep the last ErrorSamples errors,
// each cut to ErrorSampleLen bytes at a character boundary; successes and
// bad requests add none.
func TestAlertErrorSamplesBounded(t *testing.T) {
	w := newWatcher(t, Config{Interval: time.Hour, ErrorSamples: 2, ErrorSampleLen: 5})
	g, _ := newTestGroup(t, command.GroupConfig{Strategy: command.Semaphore, Alerts: w})
	for _, text := range []string{"first error", "second", "thé third"} {
		_, _ = command.Execute(context.Background(), g, failing("dep", errors.New(text)))
	}
	_, _ = command.Execute(context.Background(), g, succeeding("dep"))
	_, _ = command.Execute(context.Background(), g, failing("dep", command.BadRequest(errors.New("bad input"))))
	s := w.groups[g]
	require.Equal(t, []ErrorSample{{Err: "secon"}, {Err: "thé "}}, s.rings["dep"].samples())
	require.Equal(t, s.rings["dep"].samples(), s.rings[""].samples(), "the group's ring")
}

// TestAlertTickerDelivers: the watcher's goroutine evaluates alerts every
// Interval, and stops with the group's Close (goleak checks it).
func TestAlertTickerDelivers(t *testing.T) {
	g, _, clock, log := alertGroup(t, Config{Interval: 5 * time.Millisecond})
	_, _ = command.Execute(context.Background(), g, failing("dep", errRefused))
	clock.Advance(time.Minute)
	require.Eventually(t, func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		return len(log.alerts) == 1
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, g.Close(context.Background()))
}

// TestOnAlertPanicIsRecovered: a panic in OnAlert is logged; the next
// alert is still delivered.
func TestOnAlertPanicIsRecovered(t *testing.T) {
	var n int
	w := newWatcher(t, Config{Interval: time.Hour, OnAlert: func(Alert) { n++; panic("pager down") }})
	g, clock := newTestGroup(t, command.GroupConfig{
		Strategy:       command.Semaphore,
		CommandBreaker: circuit.Config{MinRequests: 1, OpenDuration: time.Hour},
		Alerts:         w,
	})
	_, _ = command.Execute(context.Background(), g, failing("dep", errRefused))
	clock.Advance(time.Minute)
	w.Check()
	clock.Advance(10 * time.Minute)
	w.Check()
	require.Equal(t, 2, n)
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{DegradedRate: 1.5}, "DegradedRate 1.5"},
		{Config{DegradedRate: -0.1}, "DegradedRate -0.1"},
		{Config{DegradedMinCalls: -1}, "DegradedMinCalls -1"},
		{Config{Interval: -time.Second}, "Interval -1s"},
		{Config{ErrorSamples: -1}, "ErrorSamples -1"},
		{Config{ErrorSamples: 1001}, "ErrorSamples 1001 must be in [0, 1000]"},
		{Config{ErrorSampleLen: -1}, "ErrorSampleLen -1"},
		{Config{ErrorSampleLen: 1<<16 + 1}, "ErrorSampleLen 65537 must be in [0, 65536]"},
		{Config{Tiers: []Tier{{"", time.Second}}}, "Tiers[0].Name"},
		{Config{Tiers: []Tier{{"a", 0}}}, "Tiers[0].After 0s"},
		{Config{Tiers: []Tier{{"a", 2 * time.Second}, {"b", time.Second}}}, "Tiers[1].After 1s"},
		{Config{Tiers: []Tier{{"a", time.Second}, {"a", 2 * time.Second}}}, `Tiers[1].Name "a"`},
	} {
		w, err := New(tc.cfg)
		require.Nil(t, w)
		require.ErrorIs(t, err, command.ErrInvalidConfig)
		require.True(t, strings.Contains(err.Error(), tc.want), "%v lacks %q", err, tc.want)
	}
	w := newWatcher(t, Config{})
	require.Equal(t, DefaultTiers(), w.cfg.Tiers)
	require.Equal(t, DefaultDegradedRate, w.cfg.DegradedRate)
	require.Equal(t, DefaultInterval, w.cfg.Interval)
}

// TestAlertIgnoresForcedOpen: forcing a breaker open is an operator's
// decision: no tier fires, and an outage in progress is resolved.
func TestAlertIgnoresForcedOpen(t *testing.T) {
	g, w, clock, log := alertGroup(t, Config{})
	g.Breaker().SetMode(circuit.ForcedOpen)
	clock.Advance(2 * time.Minute)
	w.Check()
	require.Empty(t, log.take())

	g.Breaker().SetMode(circuit.Normal)
	_, _ = command.Execute(context.Background(), g, failing("dep", errRefused))
	clock.Advance(time.Minute)
	w.Check()
	require.Len(t, log.take(), 1)
	b, _ := g.CommandBreaker("dep")
	b.SetMode(circuit.ForcedOpen)
	w.Check()
	got := log.take()
	require.Len(t, got, 1)
	require.Equal(t, Resolved, got[0].Kind)
}

// TestCheckWithOnTransitionReadingSnapshot: a transition that
// Check's reading of a breaker makes (open → half-open) is reported to
// an OnTransition that reads the group's Snapshot; that must not deadlock.
func TestCheckWithOnTransitionReadingSnapshot(t *testing.T) {
	var g *command.Group
	var seen sync.WaitGroup
	w := newWatcher(t, Config{Interval: time.Hour})
	seen.Add(2) // closed → open, open → half-open
	g, clock := newTestGroup(t, command.GroupConfig{
		Strategy: command.Semaphore,
		CommandBreaker: circuit.Config{
			MinRequests:  1,
			OpenDuration: time.Minute,
			OnTransition: func(circuit.Transition) {
				_ = g.Snapshot()
				seen.Done()
			},
		},
		Alerts: w,
	})
	_, _ = command.Execute(context.Background(), g, failing("dep", errRefused))
	clock.Advance(time.Minute)
	checkReturns(t, w, "Check deadlocked with an OnTransition that reads Snapshot")
	seen.Wait()
}

// TestOneWatcherManyGroups: one Watcher serves several groups (and several
// registries), names each alert's group, keeps their outages apart, and
// runs its goroutine only while it watches one: the first NewGroup starts
// it, the last Close stops it.
func TestOneWatcherManyGroups(t *testing.T) {
	log := &alertLog{}
	w := newWatcher(t, Config{OnAlert: log.add, Interval: time.Hour})
	breaker := circuit.Config{MinRequests: 1, OpenDuration: time.Hour}
	a, clockA := newTestGroup(t, command.GroupConfig{Strategy: command.Semaphore, CommandBreaker: breaker, Alerts: w})
	b, clockB := newTestGroup(t, command.GroupConfig{Strategy: command.Semaphore, CommandBreaker: breaker, Alerts: w})
	w.mu.RLock()
	running := w.stop != nil
	w.mu.RUnlock()
	require.True(t, running, "watching starts the goroutine")

	_, _ = command.Execute(context.Background(), a, failing("dep", errRefused))
	clockA.Advance(time.Minute)
	clockB.Advance(time.Minute)
	w.Check()
	got := log.take()
	require.Len(t, got, 1, "only a's breaker is open: %+v", got)
	require.Equal(t, "P3", commandSnapshot(t, a, "dep").AlertTier)

	require.NoError(t, a.Close(context.Background()))
	got = log.take()
	require.Len(t, got, 1, "a's close ends its alert: %+v", got)
	require.True(t, got[0].Kind == Resolved && got[0].Unwatched, "%+v", got[0])
	_, _ = command.Execute(context.Background(), b, failing("dep", errors.New("timeout")))
	clockB.Advance(time.Minute)
	w.Check()
	got = log.take()
	require.Len(t, got, 1, "a closed: only b's: %+v", got)
	require.Equal(t, []ErrorSample{{At: time.Minute, Err: "timeout"}}, got[0].Errors)

	require.NoError(t, b.Close(context.Background()))
	w.mu.RLock()
	running = w.stop != nil
	w.mu.RUnlock()
	require.False(t, running, "the last Close stops the goroutine")
}

// TestReconfigureKeepsTheWatcher: a Reconfigure that leaves Alerts nil
// keeps the watcher; one that names another is refused.
func TestReconfigureKeepsTheWatcher(t *testing.T) {
	g, w, _, _ := alertGroup(t, Config{})
	cfg := g.Config()
	cfg.Alerts = nil
	cfg.Timeout = time.Second
	require.NoError(t, g.Reconfigure(cfg))
	require.Same(t, w, g.Config().Alerts)
	cfg.Alerts = newWatcher(t, Config{})
	require.ErrorIs(t, g.Reconfigure(cfg), command.ErrInvalidConfig)
}

// requestIDKey is the ctx key the tests' callers store request IDs under.
type requestIDKey struct{}

// withRequestID returns a ctx carrying the request ID id.
func withRequestID(id string) context.Context {
	return context.WithValue(context.Background(), requestIDKey{}, id)
}

// requestIDOf is a Config.RequestID: the ID withRequestID stored, or "".
func requestIDOf(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// TestAlertErrorSamplesCarryRequestIDs: each sample keeps the request ID
// that Config.RequestID read from its call's ctx ("" for a call without
// one), cut to ErrorSampleLen; the alert quotes the last ErrorSamples of
// them, and its log record the same lines.
func TestAlertErrorSamplesCarryRequestIDs(t *testing.T) {
	log := &alertLog{}
	var logs logtest.Buffer
	w := newWatcher(t, Config{OnAlert: log.add, Interval: time.Hour, ErrorSamples: 3, ErrorSampleLen: 12,
		RequestID: requestIDOf})
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("deps", command.GroupConfig{
		Strategy:       command.Semaphore,
		CommandBreaker: circuit.Config{MinRequests: 4, OpenDuration: time.Hour},
		Alerts:         w,
	})
	require.NoError(t, err)
	dep := failing("dep", errors.New("refused"))
	for _, ctx := range []context.Context{withRequestID("req-1"), withRequestID("req-2"),
		context.Background(), withRequestID("req-4-and-a-long-tail")} {
		_, err := command.Execute(ctx, g, dep)
		require.Error(t, err)
	}
	clock.Advance(time.Minute)
	w.Check()
	got := log.take()
	require.Len(t, got, 1)
	require.Equal(t, []ErrorSample{
		{Err: "refused", RequestID: "req-2"},
		{Err: "refused"},
		{Err: "refused", RequestID: "req-4-and-a-"},
	}, got[0].Errors, "the last 3 of 4, the long ID cut to 12 bytes")
	require.Contains(t, logs.String(), `"errors":["request req-2: refused","refused","request req-4-and-a-: refused"]`)
}

// TestRequestIDPanicIsRecovered: a Config.RequestID that panics does not
// break the call (it fails with its own error), its sample is kept
// without an ID, and the panic is logged once, not once per failure.
func TestRequestIDPanicIsRecovered(t *testing.T) {
	var logs logtest.Buffer
	w := newWatcher(t, Config{Interval: time.Hour, RequestID: func(context.Context) string { panic("no ID here") }})
	reg := command.NewRegistry(command.RegistryConfig{Clock: new(metrics.ManualClock), Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("deps", command.GroupConfig{Strategy: command.Semaphore, Alerts: w})
	require.NoError(t, err)
	for range 3 {
		_, err := command.Execute(withRequestID("req-1"), g, failing("dep", errRefused))
		require.ErrorIs(t, err, errRefused)
	}
	s := w.groups[g]
	s.mu.Lock()
	samples := s.rings["dep"].samples()
	s.mu.Unlock()
	require.Equal(t, []ErrorSample{{Err: errRefused.Error()}, {Err: errRefused.Error()}, {Err: errRefused.Error()}}, samples)
	require.Equal(t, 1, strings.Count(logs.String(), "RequestID panicked"), "logged once:\n%s", logs.String())
	require.Contains(t, logs.String(), "no ID here")
}
