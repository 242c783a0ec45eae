package alert

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
)

// TestActionLines: each kind of alert, as the Watcher raises it, says what
// to check and the figures behind it (dependency, command, open time,
// reason, the window that tripped it; the degraded share).
func TestActionLines(t *testing.T) {
	g, w, clock, log := alertGroup(t, Config{})
	dep := failing("charge", errRefused)
	_, _ = command.Execute(context.Background(), g, dep)
	clock.Advance(time.Minute + 30*time.Second)
	w.Check()
	got := log.take()
	require.Len(t, got, 1)
	require.Equal(t, "check the health of dependency deps (command charge); breaker open for 1 min, "+
		"reason error_ratio: 1 of 1 calls failed or timed out", got[0].Action())

	clock.Advance(33*time.Minute + 30*time.Second) // the open duration (5 min) is long over: the breaker lets a probe in
	w.Check()
	got = log.take()
	require.Len(t, got, 1)
	require.Equal(t, "check the health of dependency deps (command charge); breaker open for 35 min (now half-open), "+
		"reason error_ratio: 1 of 1 calls failed or timed out", got[0].Action())

	_, err := command.Execute(context.Background(), g, succeeding("charge"))
	require.NoError(t, err)
	w.Check()
	got = log.take()
	require.Len(t, got, 1)
	require.Equal(t, "no action: dependency deps (command charge) recovered; its breaker was open for 35 min "+
		"(reached P1), reason error_ratio", got[0].Action())

	for range 18 {
		_, _ = command.Execute(context.Background(), g, succeeding("read"))
	}
	for range 2 {
		_, _ = command.Execute(context.Background(), g, degrading("read", errRefused))
	}
	w.Check()
	got = log.take()
	require.Len(t, got, 1)
	require.Equal(t, "check the health of dependency deps (command read); 10.0% of its 20 calls in the window "+
		"were answered by a fallback", got[0].Action())
}

// TestActionOfGroupBreakerAndSlowTrip: the group's own breaker is named as
// such, a slow trip quotes its slow calls, and an open time under a
// minute is in seconds.
func TestActionOfGroupBreakerAndSlowTrip(t *testing.T) {
	a := Alert{Kind: Open, Group: "search", Tier: "warn", OpenFor: 45 * time.Second, State: circuit.Open,
		Reason: circuit.ReasonSlowRatio, Health: circuit.Health{Requests: 40, Slow: 30, SlowRatio: 0.75}}
	require.Equal(t, "check the health of dependency search (group breaker); breaker open for 45 s, "+
		"reason slow_ratio: 30 of 40 calls slow", a.Action())
	a = Alert{Kind: DegradedCleared, Group: "search", Command: "query", Calls: 50, DegradedRate: 0.02}
	require.Equal(t, "no action: dependency search (command query) is no longer degraded "+
		"(2.0% of 50 calls answered by a fallback)", a.Action())
}
