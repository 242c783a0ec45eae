package main

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain fails the run if a drill leaves a goroutine behind (the ants
// package's own default pool, started when it loads, excepted).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

// TestDrillsEndToEnd runs the three drills in a short script against the
// loopback service and checks what their reports say: the faulty route's
// breakers opened during the hold and closed after the removal, its calls
// were cut off while they were open and served by the fallback, and the
// healthy route's breakers never moved. The drill runs on its load
// generator's clock (pacedClock), so a generator that falls behind on a
// slow, shared machine stops the drill's time instead of squeezing the
// script: the hold lasts its 1.5 s on that clock, and each phase holds the
// calls its schedule gives it. The bounds leave room for such a machine:
// timing figures are checked against the script, not against targets, and
// the observe phase leaves time for one more failed probe (a stalled
// machine can time a probe out after the removal).
func TestDrillsEndToEnd(t *testing.T) {
	p := params{Faults: []string{"errors", "dns", "pool"}, Warm: 300 * time.Millisecond, Hold: 1500 * time.Millisecond,
		Observe: 2500 * time.Millisecond, Rate: 100, JSON: true}
	var out bytes.Buffer
	require.NoError(t, run(&out, p))
	dec := json.NewDecoder(&out)
	for _, fault := range p.Faults {
		var r report
		require.NoError(t, dec.Decode(&r), fault)
		t.Run(fault, func(t *testing.T) {
			var text bytes.Buffer
			r.write(&text)
			t.Log("\n" + text.String())
			assert.Equal(t, fault, r.Fault)
			assert.Equal(t, float64(p.Hold.Milliseconds()), r.HoldMS, "the hold, on the drill's clock")

			for _, b := range r.Breakers {
				assert.Equal(t, "closed", b.EndState, b.Name)
				if b.Route != faultyRoute {
					assert.Zero(t, b.Opened, "the healthy route's breaker %s never opened", b.Name)
					continue
				}
				require.NotNil(t, b.FirstOpenMS, "%s opened", b.Name)
				assert.Positive(t, *b.FirstOpenMS, "%s opened after the injection", b.Name)
				assert.Less(t, *b.FirstOpenMS, r.HoldMS, "%s opened during the hold", b.Name)
				require.NotNil(t, b.LastCloseMS, "%s closed again", b.Name)
			}
			require.NotNil(t, r.Recovery.BreakersClosedMS)
			assert.Less(t, *r.Recovery.BreakersClosedMS, r.ObserveMS)
			require.NotNil(t, r.Recovery.AnswersGoodMS)
			assert.Less(t, *r.Recovery.AnswersGoodMS, r.ObserveMS)

			for _, rr := range r.Routes {
				for _, ph := range rr.Phases {
					assert.Equal(t, ph.Calls, ph.OK+ph.Fallback+ph.Errors, "%s %s: every call counted once", rr.Route, ph.Phase)
					assert.Positive(t, ph.Calls, "%s %s", rr.Route, ph.Phase)
				}
				if !rr.Faulty {
					continue
				}
				hold := rr.Phases[phaseHold]
				assert.Less(t, hold.Reached, hold.Calls, "the breakers cut the faulty route's calls off")
				assert.Less(t, hold.Arrived, hold.Reached, "the fault answered some of the calls let through")
				if fault != "errors" {
					assert.Zero(t, hold.Arrived, "no request reaches the backend through a failed lookup or a held pool")
				}
			}
			require.NotNil(t, r.Fallback.Rate)
			assert.GreaterOrEqual(t, *r.Fallback.Rate, 0.9, "the static fallback is served")
			assert.Positive(t, r.Fallback.Why["SHORT_CIRCUITED"])
			cause := map[string]string{"errors": "FAILURE", "dns": "FAILURE", "pool": "TIMEOUT"}[fault]
			assert.Positive(t, r.Fallback.Why[cause], "the fault's own failures (%s) needed fallbacks", cause)

			require.Len(t, r.Healthy, 1)
			assert.Zero(t, r.Healthy[0].Transitions)
			assert.Positive(t, r.Healthy[0].WarmP99MS)
			assert.Positive(t, r.Healthy[0].HoldP99MS)
		})
	}
	assert.False(t, dec.More(), "one report per drill")
}

func TestBadFlagsAreUsageErrors(t *testing.T) {
	good := defaultParams()
	for _, tc := range []struct {
		edit func(*params)
		want string
	}{
		{func(p *params) { p.Faults = []string{"flood"} }, `-fault "flood" is not a drill, want one of dns, errors, pool`},
		{func(p *params) { p.Faults = nil }, "-fault names no drill"},
		{func(p *params) { p.Warm = 0 }, "-warm 0s must be positive"},
		{func(p *params) { p.Hold = -time.Second }, "-hold -1s must be positive"},
		{func(p *params) { p.Observe = 0 }, "-observe 0s must be positive"},
		{func(p *params) { p.Rate = 0 }, "-rate 0 must be in 1..1000"},
	} {
		p := good
		tc.edit(&p)
		err := run(io.Discard, p)
		require.ErrorIs(t, err, errUsage)
		assert.Contains(t, err.Error(), tc.want)
	}
}
