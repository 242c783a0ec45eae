package alert

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit/party"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// TestCheckSkipsQuietGroups: Check snapshots the groups with calls in their
// window, and only reads the quiet ones (the test Watch gets): over 100
// groups it allocates at least once per snapshot taken while they are
// busy, and next to nothing once their windows have emptied.
func TestCheckSkipsQuietGroups(t *testing.T) {
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	w := newWatcher(t, Config{Interval: time.Hour})
	const n = 100
	for i := range n {
		g, err := reg.NewGroup(fmt.Sprintf("g%03d", i), command.GroupConfig{Strategy: command.Semaphore, Alerts: w})
		require.NoError(t, err)
		_, err = command.Execute(context.Background(), g, succeeding("dep"))
		require.NoError(t, err)
	}
	busy := testing.AllocsPerRun(10, w.Check)
	require.GreaterOrEqual(t, busy, float64(n), "a snapshot per busy group")
	clock.Advance(11 * time.Second) // every window empties
	quiet := testing.AllocsPerRun(10, w.Check)
	require.Less(t, quiet, float64(n)/10, "no snapshot of a quiet group (busy: %v allocations)", busy)
}

// TestQuietGroupOpenedByItsFleetAlerts: a breaker opened from outside (a
// fleet's Member.Open) with no local call makes its group not quiet: the
// tier still fires.
func TestQuietGroupOpenedByItsFleetAlerts(t *testing.T) {
	g, w, clock, log := alertGroup(t, Config{Tiers: []Tier{{"warn", time.Second}}})
	idle := func() bool {
		w.mu.RLock()
		defer w.mu.RUnlock()
		return w.groups[g].idle()
	}
	require.True(t, idle(), "a group never called")
	m, err := party.Join(g.Breaker(), quietParty{})
	require.NoError(t, err)
	defer m.Leave()
	require.True(t, m.Open(m.Look()))
	require.False(t, idle(), "its breaker is open")
	w.Check()
	clock.Advance(time.Second)
	w.Check()
	got := log.take()
	require.Len(t, got, 1)
	require.Equal(t, Open, got[0].Kind)
	require.Equal(t, party.ReasonOpen, got[0].Reason)
}

// quietParty is a Party that lets every probe through.
type quietParty struct{}

func (quietParty) MayProbe() bool { return true }
func (quietParty) Status() string { return "test" }
