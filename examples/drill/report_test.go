package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/metrics"
)

const ms1 = time.Millisecond

// scriptedDrill records, on a manual clock, a drill whose every figure can
// be worked out by hand: 3 s of calls every 100 ms on both routes, the
// fault injected at 1 s and removed at 2 s, and a real breaker for the
// faulty route driven by the calls' outcomes (a 200 ms window, 2 calls
// minimum, 60%, open 500 ms, one probe to close), so it opens at 1100 ms,
// fails its probe at 1600 ms and closes at 2100 ms.
func scriptedDrill(t *testing.T) drillLog {
	clock := new(metrics.ManualClock)
	rec := new(recorder)
	quiet := slog.New(slog.DiscardHandler)
	newBreaker := func(name string) *circuit.Breaker {
		b, err := circuit.New(circuit.Config{Name: name, Clock: clock, Logger: quiet,
			Window: metrics.Window{Length: 200 * ms1, Buckets: 2}, MinRequests: 2, FailureRatio: 0.6,
			OpenDuration: 500 * ms1, HalfOpenSuccesses: 1})
		require.NoError(t, err)
		return b
	}
	stock, item := newBreaker("inventory/GetStock"), newBreaker("catalog/GetItem")
	defer rec.watch("inventory", stock)()
	defer rec.watch("catalog", item)()

	rec.mark(markStart, 0)
	for at := time.Duration(0); at < 3*time.Second; at += 100 * ms1 {
		clock.Set(at)
		switch at {
		case time.Second:
			rec.mark(markInject, at)
		case 2 * time.Second:
			rec.mark(markRemove, at)
		}
		faulty := at >= time.Second && at < 2*time.Second || at == 2200*ms1

		// inventory: through the breaker; the fault fails what it lets through.
		c := call{Route: "inventory", Start: at, Latency: 5 * ms1}
		switch p, err := stock.Allow(); {
		case err != nil:
			c.Outcome, c.Event, c.Fallback = outcomeFallback, "SHORT_CIRCUITED", "FALLBACK_SUCCESS"
		case faulty:
			p.Record(metrics.Failure, 5*ms1)
			c.Outcome, c.Event, c.Fallback = outcomeFallback, "FAILURE", "FALLBACK_SUCCESS"
		default:
			p.Record(metrics.Success, 5*ms1)
			c.Outcome, c.Event = outcomeOK, "SUCCESS"
			rec.arrival("inventory", at)
		}
		if at == 1500*ms1 { // the fallback limiter refused this one
			c.Outcome, c.Fallback = outcomeError, "FALLBACK_REJECTION"
		}
		rec.call(c)
		if at == time.Second { // the first injected failure still reached the backend
			rec.arrival("inventory", at)
		}

		// catalog: healthy; 2 ms warm, 3 ms in the hold, one slow call in each, one fallback in the hold.
		c = call{Route: "catalog", Start: at, Latency: 2 * ms1, Outcome: outcomeOK, Event: "SUCCESS"}
		switch {
		case at == 500*ms1:
			c.Latency = 10 * ms1
		case at == 1300*ms1: // the generator was late to send it
			c.Latency, c.Lag = 30*ms1, 25*ms1
		case at == 1400*ms1:
			c.Latency, c.Outcome, c.Event, c.Fallback = 3*ms1, outcomeFallback, "TIMEOUT", "FALLBACK_SUCCESS"
		case at >= time.Second && at < 2*time.Second:
			c.Latency = 3 * ms1
		}
		rec.call(c)
		rec.arrival("catalog", at)
	}
	rec.mark(markEnd, 3*time.Second)
	return rec.snapshot()
}

var scriptedSpec = drillSpec{Fault: "scripted", What: "every call the breaker lets through fails", Faulty: "inventory",
	Routes: []string{"catalog", "inventory"}, Rate: 10}

func TestReportOfARecordedDrill(t *testing.T) {
	r := buildReport(scriptedDrill(t), scriptedSpec)

	assert.Equal(t, []breakerReport{
		{Name: "inventory/GetStock", Route: "inventory", Opened: 2, FirstOpenMS: ptr(100.0), LastCloseMS: ptr(1100.0),
			NotClosedMS: 1000, EndState: "closed"},
		{Name: "catalog/GetItem", Route: "catalog", EndState: "closed"},
	}, r.Breakers)
	var timeline []string
	for _, e := range r.Timeline {
		timeline = append(timeline, e.Breaker+" "+e.From+">"+e.To+" "+e.Reason)
		assert.Contains(t, []float64{100, 600, 1100}, e.AtMS)
	}
	assert.Equal(t, []string{
		"inventory/GetStock closed>open error_ratio",
		"inventory/GetStock open>half-open open_elapsed",
		"inventory/GetStock half-open>open probe_failed",
		"inventory/GetStock open>half-open open_elapsed",
		"inventory/GetStock half-open>closed probes_succeeded",
	}, timeline)
	assert.Equal(t, timelineEntry{AtMS: 100, Breaker: "inventory/GetStock", From: "closed", To: "open", Reason: "error_ratio",
		Requests: 2, ErrorRatio: 1}, r.Timeline[0])

	assert.Equal(t, []routeReport{
		{Route: "catalog", Phases: []phaseStats{
			{Phase: "warm", Calls: 10, OK: 10, Reached: 10, Arrived: 10, P50MS: 2, P99MS: 10},
			{Phase: "hold", Calls: 10, OK: 9, Fallback: 1, Reached: 10, Arrived: 10, P50MS: 3, P99MS: 30, LagMaxMS: 25},
			{Phase: "after", Calls: 10, OK: 10, Reached: 10, Arrived: 10, P50MS: 2, P99MS: 2},
		}},
		{Route: "inventory", Faulty: true, Phases: []phaseStats{
			{Phase: "warm", Calls: 10, OK: 10, Reached: 10, Arrived: 10, P50MS: 5, P99MS: 5},
			// 1000 and 1100 fail and open it; 1200..1900 are refused, 1600 being its failed probe.
			{Phase: "hold", Calls: 10, Fallback: 9, Errors: 1, Reached: 3, Arrived: 1, P50MS: 5, P99MS: 5},
			// 2000 refused; 2100 the probe that closes it; 2200 fails, the rest succeed.
			{Phase: "after", Calls: 10, OK: 8, Fallback: 2, Reached: 9, Arrived: 8, P50MS: 5, P99MS: 5},
		}},
	}, r.Routes)

	assert.Equal(t, fallbackReport{Needed: 12, Served: 11, Rate: ptr(0.9167),
		Why: map[string]int{"SHORT_CIRCUITED": 8, "FAILURE": 4}}, r.Fallback)
	// 2000 is refused; 2100, alone in its 100 ms, gets the backend's answer (2200's failure comes after).
	assert.Equal(t, recoveryReport{BreakersClosedMS: ptr(100.0), LastClosed: "inventory/GetStock", AnswersGoodMS: ptr(100.0)}, r.Recovery)
	assert.Equal(t, []healthyReport{{Route: "catalog", WarmP99MS: 10, HoldP99MS: 30, HoldOverWarm: 3, HoldCalls: 10, Affected: 1}}, r.Healthy)
	assert.Equal(t, 1000.0, r.WarmMS)
	assert.Equal(t, 1000.0, r.HoldMS)
	assert.Equal(t, 1000.0, r.ObserveMS)
}

func TestReportPrintsForAPerson(t *testing.T) {
	var out bytes.Buffer
	buildReport(scriptedDrill(t), scriptedSpec).write(&out)
	want := `Drill "scripted" on inventory: every call the breaker lets through fails.
Script: warm 1s, inject, hold 1s, remove, observe 1s; 10 req/s per route, open loop. Times are ms from the injection.

Breakers
  breaker             opened  first open  last close  not closed ms  at the end
  inventory/GetStock  2       100         1100        1000           closed
  catalog/GetItem     0       -           -           0              closed

Timeline
  100   inventory/GetStock  closed -> open       error_ratio       window: 2, 100% failed
  600   inventory/GetStock  open -> half-open    open_elapsed      window: 0, 0% failed
  600   inventory/GetStock  half-open -> open    probe_failed      window: 1, 100% failed
  1100  inventory/GetStock  open -> half-open    open_elapsed      window: 0, 0% failed
  1100  inventory/GetStock  half-open -> closed  probes_succeeded  window: 1, 0% failed

Calls by the phase they started in
  route      phase  calls  ok  fallback  errors  reached  arrived  p50 ms  p99 ms  send lag max ms
  catalog    warm   10     10  0         0       10       10       2.0     10.0    0.0
             hold   10     9   1         0       10       10       3.0     30.0    25.0
             after  10     10  0         0       10       10       2.0     2.0     0.0
  inventory  warm   10     10  0         0       10       10       5.0     5.0     0.0
             hold   10     0   9         1       3        1        5.0     5.0     0.0
             after  10     8   2         0       9        8        5.0     5.0     0.0

Faulty dependency (inventory)
  let through to it by the breakers and the bulkhead: 3 of 10 calls in the hold, 9 of 10 after
  arrived at the backend: 1 in the hold, 8 after
  fallbacks: 12 needed, 11 served (91.7%); needed after 8 SHORT_CIRCUITED, 4 FAILURE

Recovery, from the removal at 1000 ms
  breakers closed after 100 ms (the last: inventory/GetStock)
  answers good again after 100 ms (the first 100ms in which inventory's share of the backend's answers was back to 95% of warm)

Healthy routes (blast radius)
  catalog: p99 30.0 ms in the hold against 10.0 ms warm (3.00x); 1 of 10 calls in the hold degraded or failed; 0 breaker transitions
`
	got := out.String()
	assert.Equal(t, want, stripTrailingSpaces(got))
}

// stripTrailingSpaces removes the padding tabwriter leaves at line ends.
func stripTrailingSpaces(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

func TestReportJSONKeepsEveryFigure(t *testing.T) {
	r := buildReport(scriptedDrill(t), scriptedSpec)
	b, err := json.Marshal(r)
	require.NoError(t, err)
	var back report
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, r, back)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(b, &raw))
	assert.Equal(t, map[string]any{"breakers_closed_ms": 100.0, "last_closed": "inventory/GetStock", "answers_good_ms": 100.0}, raw["recovery"])
	assert.Equal(t, 0.9167, raw["fallback"].(map[string]any)["rate"])
}

func TestReportOfABreakerStillOpenAtTheEnd(t *testing.T) {
	l := drillLog{
		Marks:    [numMarks]time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second},
		Breakers: []watched{{Name: "inventory", Route: "inventory"}, {Name: "catalog", Route: "catalog"}},
		Transitions: []transition{
			{Route: "inventory", Transition: circuit.Transition{Name: "inventory", From: circuit.Closed, To: circuit.Open, Reason: circuit.ReasonErrorRatio, At: 1200 * ms1}},
			{Route: "inventory", Transition: circuit.Transition{Name: "inventory", From: circuit.Open, To: circuit.HalfOpen, Reason: circuit.ReasonOpenElapsed, At: 2200 * ms1}},
		},
		Calls: []call{
			{Route: "inventory", Start: 500 * ms1, Outcome: outcomeOK},
			{Route: "inventory", Start: 520 * ms1, Outcome: outcomeOK},
			{Route: "inventory", Start: 2500 * ms1, Outcome: outcomeOK},
			{Route: "inventory", Start: 2550 * ms1, Outcome: outcomeFallback, Fallback: "FALLBACK_SUCCESS", Event: "SHORT_CIRCUITED"},
			{Route: "inventory", Start: 2900 * ms1, Outcome: outcomeFallback, Fallback: "FALLBACK_SUCCESS", Event: "SHORT_CIRCUITED"},
		},
	}
	r := buildReport(l, scriptedSpec)
	assert.Equal(t, breakerReport{Name: "inventory", Route: "inventory", Opened: 1, FirstOpenMS: ptr(200.0), NotClosedMS: 1800, EndState: "half-open"}, r.Breakers[0])
	assert.Equal(t, recoveryReport{}, r.Recovery, "not recovered: no figure")
	var out bytes.Buffer
	r.write(&out)
	assert.Contains(t, out.String(), "breakers: not all closed by the end")
	assert.Contains(t, out.String(), "answers: inventory's share of the backend's answers was never back to 95% of warm")

	// No breaker opened: no breaker figure either, and the report says why.
	l.Transitions = nil
	l.Calls = l.Calls[:3]
	r = buildReport(l, scriptedSpec)
	assert.Equal(t, recoveryReport{AnswersGoodMS: ptr(500.0)}, r.Recovery)

	// No warm call: nothing to compare with.
	assert.Nil(t, answersGood(l.Calls[2:], l.Marks))
	out.Reset()
	r.write(&out)
	assert.Contains(t, out.String(), "breakers: none opened")
	assert.Contains(t, out.String(), "fallbacks: none needed")
	assert.Contains(t, out.String(), "no breaker changed state")
}

func TestPercentileIsTheNearestRank(t *testing.T) {
	assert.Zero(t, percentile(nil, 99))
	ds := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	assert.Equal(t, time.Duration(10), percentile(ds, 99))
	assert.Equal(t, time.Duration(9), percentile(ds, 90))
	assert.Equal(t, time.Duration(5), percentile(ds, 50))
	assert.Equal(t, time.Duration(1), percentile(ds, 0))
}
