package command

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
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
// on one failure and stays open 5 minutes, with alerts collected in the
// log returned. Its ticker runs every hour: the tests call CheckAlerts.
func alertGroup(t *testing.T, alerts AlertConfig) (*Group, *metrics.ManualClock, *alertLog) {
	t.Helper()
	log := &alertLog{}
	alerts.OnAlert = log.add
	if alerts.Interval == 0 {
		alerts.Interval = time.Hour
	}
	g, clock := newTestGroup(t, GroupConfig{
		Strategy:       Semaphore,
		Timeout:        NoTimeout,
		CommandBreaker: circuit.Config{MinRequests: 1, Open: circuit.OpenConfig{Duration: 5 * time.Minute}, HalfOpen: circuit.HalfOpenConfig{Successes: 1}},
		Alerts:         alerts,
	})
	return g, clock, log
}

var errRefused = errors.New("dial tcp 10.0.0.7:443: connection refused")

// TestAlertTiersByOpenDuration: an open breaker fires P3 at 1 minute, P2 at
// 10 and P1 at 30, each once, naming group, command, trip reason, window
// and the errors that tripped it; closing resolves it.
func TestAlertTiersByOpenDuration(t *testing.T) {
	g, clock, log := alertGroup(t, AlertConfig{})
	dep := op[int]{name: "dep", run: fail[int](errRefused)}
	_, err := Execute(context.Background(), g, dep)
	require.Error(t, err)
	g.CheckAlerts()
	clock.Advance(59 * time.Second)
	g.CheckAlerts()
	require.Empty(t, log.take(), "no alert before the first tier")

	clock.Advance(time.Second)
	g.CheckAlerts()
	got := log.take()
	require.Len(t, got, 1)
	a := got[0]
	require.Equal(t, AlertOpen, a.Kind)
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
		g.CheckAlerts()
		require.Empty(t, log.take())
		clock.Set(tier.at)
		g.CheckAlerts()
		got = log.take()
		require.Len(t, got, 1)
		require.Equal(t, tier.name, got[0].Tier)
		require.Equal(t, tier.at, got[0].OpenFor)
		require.Equal(t, []ErrorSample{{At: 0, Err: errRefused.Error()}}, got[0].Errors,
			"the samples that tripped it, not the probes' since")
		// A failed probe meanwhile keeps the outage going.
		_, _ = Execute(context.Background(), g, dep)
	}
	g.CheckAlerts()
	require.Empty(t, log.take(), "each tier fires once")

	clock.Advance(5 * time.Minute)
	_, err = Execute(context.Background(), g, op[int]{name: "dep", run: succeed(1)})
	require.NoError(t, err)
	clock.Advance(time.Minute)
	g.CheckAlerts()
	got = log.take()
	require.Len(t, got, 1)
	require.Equal(t, AlertResolved, got[0].Kind)
	require.Equal(t, "P1", got[0].Tier)
	require.Equal(t, 35*time.Minute, got[0].OpenFor, "until it closed, not until the check")
	require.Equal(t, circuit.Closed, got[0].State)
	require.Empty(t, commandSnapshot(t, g, "dep").AlertTier)
}

// TestAlertSkipsToTheHighestTier: a breaker found open for 11 minutes at
// the first check fires P2 only, and an outage that never reached a tier
// resolves silently.
func TestAlertSkipsToTheHighestTier(t *testing.T) {
	g, clock, log := alertGroup(t, AlertConfig{})
	_, _ = Execute(context.Background(), g, op[int]{name: "dep", run: fail[int](errRefused)})
	clock.Advance(11 * time.Minute)
	g.CheckAlerts()
	got := log.take()
	require.Len(t, got, 1)
	require.Equal(t, "P2", got[0].Tier)

	g2, clock2, log2 := alertGroup(t, AlertConfig{})
	_, _ = Execute(context.Background(), g2, op[int]{name: "dep", run: fail[int](errRefused)})
	g2.CheckAlerts()
	clock2.Advance(5 * time.Minute)
	_, err := Execute(context.Background(), g2, op[int]{name: "dep", run: succeed(1)})
	require.NoError(t, err)
	g2.CheckAlerts()
	require.Empty(t, log2.take())
}

// TestAlertCustomTiersAndGroupBreaker: configured tiers apply to the
// group's own breaker too (Command ""); the command's breaker, which needs
// 20 calls to judge, stays closed.
func TestAlertCustomTiersAndGroupBreaker(t *testing.T) {
	log := &alertLog{}
	g, clock := newTestGroup(t, GroupConfig{
		Strategy: Semaphore,
		Breaker:  circuit.Config{MinRequests: 1, Open: circuit.OpenConfig{Duration: time.Hour}},
		Alerts:   AlertConfig{OnAlert: log.add, Interval: time.Hour, Tiers: []AlertTier{{"warn", time.Second}}},
	})
	_, _ = Execute(context.Background(), g, op[int]{name: "dep", run: fail[int](errRefused)})
	clock.Advance(time.Second)
	g.CheckAlerts()
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
	g, clock, log := alertGroup(t, AlertConfig{})
	ok := op[int]{name: "read", run: succeed(1)}
	degraded := opFB[int]{op: op[int]{name: "read", run: fail[int](errRefused)},
		fb: func(context.Context, error) (int, error) { return 0, nil }}
	for range 19 {
		_, err := Execute(context.Background(), g, ok)
		require.NoError(t, err)
	}
	_, _, err := ExecuteInfo(context.Background(), g, degraded)
	require.NoError(t, err)
	g.CheckAlerts()
	require.Empty(t, log.take(), "1 of 20 is 5%: not above")
	require.False(t, commandSnapshot(t, g, "read").DegradedAlarm)

	_, _ = Execute(context.Background(), g, degraded) // 2 of 21
	g.CheckAlerts()
	got := log.take()
	require.Len(t, got, 1)
	require.Equal(t, AlertDegraded, got[0].Kind)
	require.Equal(t, "read", got[0].Command)
	require.Equal(t, int64(21), got[0].Calls)
	require.InDelta(t, 2.0/21, got[0].DegradedRate, 1e-9)
	require.Len(t, got[0].Errors, 2)
	require.True(t, commandSnapshot(t, g, "read").DegradedAlarm)
	g.CheckAlerts()
	require.Empty(t, log.take(), "one alert while it stays above")

	clock.Advance(11 * time.Second) // the window empties
	g.CheckAlerts()
	got = log.take()
	require.Len(t, got, 1)
	require.Equal(t, AlertDegradedCleared, got[0].Kind)
	require.False(t, commandSnapshot(t, g, "read").DegradedAlarm)
}

// TestDegradedAlarmNeedsMinCalls: below DegradedMinCalls no alarm.
func TestDegradedAlarmNeedsMinCalls(t *testing.T) {
	g, _, log := alertGroup(t, AlertConfig{DegradedMinCalls: 3})
	degraded := opFB[int]{op: op[int]{name: "read", run: fail[int](errRefused)},
		fb: func(context.Context, error) (int, error) { return 0, nil }}
	for range 2 {
		_, _ = Execute(context.Background(), g, degraded)
	}
	g.CheckAlerts()
	require.Empty(t, log.take())
}

// TestAlertErrorSamplesBounded: samples keep the last ErrorSamples errors,
// each cut to ErrorSampleLen bytes at a character boundary; successes and
// bad requests add none.
func TestAlertErrorSamplesBounded(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore,
		Alerts: AlertConfig{OnAlert: func(Alert) {}, Interval: time.Hour, ErrorSamples: 2, ErrorSampleLen: 5}})
	for _, text := range []string{"first error", "second", "thé third"} {
		_, _ = Execute(context.Background(), g, op[int]{name: "dep", run: fail[int](errors.New(text))})
	}
	_, _ = Execute(context.Background(), g, op[int]{name: "dep", run: succeed(1)})
	_, _ = Execute(context.Background(), g, op[int]{name: "dep", run: fail[int](BadRequest(errors.New("bad input")))})
	c := g.commands.Load().names.get("dep")
	require.Equal(t, []ErrorSample{{Err: "secon"}, {Err: "thé "}}, c.errors.samples())
	require.Equal(t, c.errors.samples(), g.alerts.errors.samples())
}

// TestAlertTickerDelivers: the group's own goroutine evaluates alerts every
// Interval, and stops with Close (goleak checks it).
func TestAlertTickerDelivers(t *testing.T) {
	g, clock, log := alertGroup(t, AlertConfig{Interval: 5 * time.Millisecond})
	_, _ = Execute(context.Background(), g, op[int]{name: "dep", run: fail[int](errRefused)})
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
	g, clock := newTestGroup(t, GroupConfig{
		Strategy:       Semaphore,
		CommandBreaker: circuit.Config{MinRequests: 1, Open: circuit.OpenConfig{Duration: time.Hour}},
		Alerts:         AlertConfig{Interval: time.Hour, OnAlert: func(Alert) { n++; panic("pager down") }},
	})
	_, _ = Execute(context.Background(), g, op[int]{name: "dep", run: fail[int](errRefused)})
	clock.Advance(time.Minute)
	g.CheckAlerts()
	clock.Advance(10 * time.Minute)
	g.CheckAlerts()
	require.Equal(t, 2, n)
}

func TestAlertConfigValidation(t *testing.T) {
	on := func(Alert) {}
	for _, tc := range []struct {
		cfg  AlertConfig
		want string
	}{
		{AlertConfig{Interval: time.Second}, "Alerts.OnAlert is nil"},
		{AlertConfig{OnAlert: on, DegradedRate: 1.5}, "Alerts.DegradedRate 1.5"},
		{AlertConfig{OnAlert: on, DegradedRate: -0.1}, "Alerts.DegradedRate -0.1"},
		{AlertConfig{OnAlert: on, DegradedMinCalls: -1}, "Alerts.DegradedMinCalls -1"},
		{AlertConfig{OnAlert: on, Interval: -time.Second}, "Alerts.Interval -1s"},
		{AlertConfig{OnAlert: on, ErrorSamples: -1}, "Alerts.ErrorSamples -1"},
		{AlertConfig{OnAlert: on, ErrorSampleLen: -1}, "Alerts.ErrorSampleLen -1"},
		{AlertConfig{OnAlert: on, Tiers: []AlertTier{{"", time.Second}}}, "Alerts.Tiers[0].Name"},
		{AlertConfig{OnAlert: on, Tiers: []AlertTier{{"a", 0}}}, "Alerts.Tiers[0].After 0s"},
		{AlertConfig{OnAlert: on, Tiers: []AlertTier{{"a", 2 * time.Second}, {"b", time.Second}}}, "Alerts.Tiers[1].After 1s"},
		{AlertConfig{OnAlert: on, Tiers: []AlertTier{{"a", time.Second}, {"a", 2 * time.Second}}}, `Alerts.Tiers[1].Name "a"`},
	} {
		err := GroupConfig{Alerts: tc.cfg}.Validate()
		require.ErrorIs(t, err, ErrInvalidConfig)
		require.True(t, strings.Contains(err.Error(), tc.want), "%v lacks %q", err, tc.want)
	}
	require.NoError(t, GroupConfig{Alerts: AlertConfig{OnAlert: on}}.Validate())
	cfg := GroupConfig{Alerts: AlertConfig{OnAlert: on}}.WithDefaults().Alerts
	require.Equal(t, DefaultAlertTiers(), cfg.Tiers)
	require.Equal(t, DefaultDegradedRate, cfg.DegradedRate)
}

// TestAlertIgnoresForcedOpen: forcing a breaker open is an operator's
// decision: no tier fires, and an outage in progress is resolved.
func TestAlertIgnoresForcedOpen(t *testing.T) {
	g, clock, log := alertGroup(t, AlertConfig{})
	g.Breaker().SetMode(circuit.ForcedOpen)
	clock.Advance(2 * time.Minute)
	g.CheckAlerts()
	require.Empty(t, log.take())

	g.Breaker().SetMode(circuit.Normal)
	_, _ = Execute(context.Background(), g, op[int]{name: "dep", run: fail[int](errRefused)})
	clock.Advance(time.Minute)
	g.CheckAlerts()
	require.Len(t, log.take(), 1)
	b, _ := g.CommandBreaker("dep")
	b.SetMode(circuit.ForcedOpen)
	g.CheckAlerts()
	got := log.take()
	require.Len(t, got, 1)
	require.Equal(t, AlertResolved, got[0].Kind)
}

// TestCheckAlertsWithOnTransitionReadingSnapshot: a transition that
// CheckAlerts' reading of a breaker makes (open → half-open) is reported to
// an OnTransition that reads the group's Snapshot; that must not deadlock.
func TestCheckAlertsWithOnTransitionReadingSnapshot(t *testing.T) {
	var g *Group
	var seen sync.WaitGroup
	seen.Add(2) // closed → open, open → half-open
	g, clock := newTestGroup(t, GroupConfig{
		Strategy: Semaphore,
		CommandBreaker: circuit.Config{
			MinRequests: 1,
			Open:        circuit.OpenConfig{Duration: time.Minute},
			OnTransition: func(circuit.Transition) {
				_ = g.Snapshot()
				seen.Done()
			},
		},
		Alerts: AlertConfig{OnAlert: func(Alert) {}, Interval: time.Hour},
	})
	_, _ = Execute(context.Background(), g, op[int]{name: "dep", run: fail[int](errRefused)})
	clock.Advance(time.Minute)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.CheckAlerts()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("CheckAlerts deadlocked with an OnTransition that reads Snapshot")
	}
	seen.Wait()
}
