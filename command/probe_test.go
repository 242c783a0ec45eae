package command

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/metrics"
)

var errStatus500 = errors.New("http status 500")

// probeGroup returns a group, on a manual clock, whose command breaker
// trips on one failure, stays open 1 s and closes on one good probe.
func probeGroup(t *testing.T, strategy Strategy, classify func(error) metrics.Event) (*Group, *metrics.ManualClock) {
	t.Helper()
	return newTestGroup(t, GroupConfig{
		Strategy:        strategy,
		Timeout:         NoTimeout,
		CommandBreaker:  circuit.Config{MinRequests: 1, OpenDuration: time.Second, HalfOpenSuccesses: 1},
		ProbeClassifier: classify,
	})
}

// tripped makes one failing call so that the command "dep" opens, and
// moves the clock to the end of its open duration.
func tripped(t *testing.T, g *Group, clock *metrics.ManualClock) {
	t.Helper()
	_, err := Execute(context.Background(), g, op[int]{name: "dep", run: fail[int](errStatus500)})
	require.Error(t, err)
	b, _ := g.CommandBreaker("dep")
	require.Equal(t, circuit.Open, b.State())
	clock.Advance(time.Second)
}

func TestIsProbeTellsRunItIsAProbe(t *testing.T) {
	for _, s := range []Strategy{Semaphore, Thread} {
		t.Run(s.String(), func(t *testing.T) {
			g, clock := probeGroup(t, s, nil)
			var seen []bool
			probeOp := op[int]{name: "dep", run: func(ctx context.Context) (int, error) {
				seen = append(seen, IsProbe(ctx))
				return 1, nil
			}}
			_, info, err := ExecuteInfo(context.Background(), g, probeOp)
			require.NoError(t, err)
			require.False(t, info.Events.Has(metrics.Probe))
			require.False(t, info.Events.Has(metrics.Probe))

			tripped(t, g, clock)
			_, info, err = ExecuteInfo(context.Background(), g, probeOp)
			require.NoError(t, err)
			require.True(t, info.Events.Has(metrics.Probe))
			require.Equal(t, metrics.SetOf(metrics.Success, metrics.Probe, metrics.ProbeSuccess), info.Events)
			require.Equal(t, []bool{false, true}, seen)
			require.False(t, IsProbe(context.Background()))

			c := counts(t, g, "dep")
			require.Equal(t, int64(1), c[metrics.Probe])
			require.Equal(t, int64(1), c[metrics.ProbeSuccess])
			require.Zero(t, c[metrics.ProbeFailure])
		})
	}
}

// TestProbeClassifierClosesOnAnAnswer: a probe that got a 500 proves the
// dependency reachable under the team's rule and closes the breaker; without
// the classifier it reopens it. The caller sees the FAILURE either way.
func TestProbeClassifierClosesOnAnAnswer(t *testing.T) {
	answered := func(err error) metrics.Event {
		if errors.Is(err, errStatus500) {
			return metrics.Success
		}
		return metrics.Failure
	}
	for _, tc := range []struct {
		name     string
		classify func(error) metrics.Event
		want     circuit.State
		judged   metrics.Event
	}{
		{"with classifier", answered, circuit.Closed, metrics.ProbeSuccess},
		{"without", nil, circuit.Open, metrics.ProbeFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, clock := probeGroup(t, Semaphore, tc.classify)
			tripped(t, g, clock)
			_, info, err := ExecuteInfo(context.Background(), g, op[int]{name: "dep", run: fail[int](errStatus500)})
			require.ErrorIs(t, err, errStatus500)
			require.Equal(t, metrics.Failure, info.Event)
			require.True(t, info.Events.Has(tc.judged), info.Events.String())
			b, _ := g.CommandBreaker("dep")
			require.Equal(t, tc.want, b.State())
			require.Equal(t, circuit.Closed, g.Breaker().State(), "the group's breaker did not probe")
		})
	}
}

// TestProbeClassifierNeverExcusesATimeout: a timed-out probe fails even when
// the classifier would pass every error.
func TestProbeClassifierNeverExcusesATimeout(t *testing.T) {
	g, clock := newTestGroup(t, GroupConfig{
		Strategy: Semaphore,
		// Long enough that the call that trips the breaker never meets it
		// before Run starts (QUEUE_TIMEOUT, not counted) on a loaded machine.
		Timeout:         250 * time.Millisecond,
		CommandBreaker:  circuit.Config{MinRequests: 1, OpenDuration: time.Second, HalfOpenSuccesses: 1},
		ProbeClassifier: func(error) metrics.Event { return metrics.Success },
	})
	tripped(t, g, clock)
	_, info, err := ExecuteInfo(context.Background(), g, op[int]{name: "dep", run: waitDone[int]})
	require.ErrorIs(t, err, ErrTimeout)
	require.True(t, info.Events.Has(metrics.ProbeFailure))
	b, _ := g.CommandBreaker("dep")
	require.Equal(t, circuit.Open, b.State())
}

// TestProbeClassifierPanicFailsTheProbe: a classifier's panic is logged and
// the probe counts as the failure it was; the command's own classifier
// overrides the group's.
func TestProbeClassifierPanicFailsTheProbe(t *testing.T) {
	g, clock := newTestGroup(t, GroupConfig{
		Strategy:        Semaphore,
		Timeout:         NoTimeout,
		CommandBreaker:  circuit.Config{MinRequests: 1, OpenDuration: time.Second, HalfOpenSuccesses: 1},
		ProbeClassifier: func(error) metrics.Event { return metrics.Success },
		Commands: map[string]CommandConfig{"dep": {ProbeClassifier: func(error) metrics.Event {
			panic("classifier bug")
		}}},
	})
	tripped(t, g, clock)
	_, info, err := ExecuteInfo(context.Background(), g, op[int]{name: "dep", run: fail[int](errStatus500)})
	require.Error(t, err)
	require.True(t, info.Events.Has(metrics.ProbeFailure))
	b, _ := g.CommandBreaker("dep")
	require.Equal(t, circuit.Open, b.State())
}
