package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind. IgnoreCurrent
// skips the goroutines ants' package init starts for its default pool (the
// chain scenario imports command).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

func TestWithBreaker(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Params)
	}{
		{"defaults", func(*Params) {}},
		{"1000 qps", func(p *Params) { p.QPS = 1000 }},
		{"ratio 0.25", func(p *Params) { p.FailureRatio = 0.25 }},
		{"2 s window", func(p *Params) {
			p.Window = 2 * time.Second
			p.OutageEnd = 8 * time.Second
			p.Duration = 12 * time.Second
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultParams()
			tc.edit(&p)
			start := time.Now()
			r, err := Simulate(p)
			require.NoError(t, err)
			assert.Less(t, time.Since(start), time.Second)

			require.NotEmpty(t, r.Transitions)
			trip := r.Transitions[0]
			assert.Equal(t, Transition{AtMS: trip.AtMS, From: "closed", To: "open", Reason: "error_ratio"}, trip)
			// Detection takes about window × ratio (give or take a bucket).
			outageMS, windowMS := ms(p.OutageStart), ms(p.Window)
			bucketMS := windowMS / float64(p.Buckets)
			assert.InDelta(t, outageMS+windowMS*p.FailureRatio, trip.AtMS, bucketMS, "trip time")

			// During the outage, only the calls before the trip and the
			// probes reach the dependency.
			probes := 0
			for _, tr := range r.Transitions {
				if tr.Reason == "probe_failed" {
					probes++
				}
			}
			beforeTrip := int((trip.AtMS-outageMS)*p.QPS/1000) + 1
			assert.Equal(t, beforeTrip+probes, r.ForwardedDuringOutage)
			assert.Equal(t, r.ForwardedDuringOutage, r.DownstreamFailures)
			assert.Equal(t, int((ms(p.OutageEnd)-outageMS)*p.QPS/1000), r.ForwardedDuringOutage+r.RejectedDuringOutage)
			assert.GreaterOrEqual(t, probes, 1)

			// It closes once the outage is over, within an open duration
			// plus the probes it needs.
			last := r.Transitions[len(r.Transitions)-1]
			assert.Equal(t, "probes_succeeded", last.Reason)
			assert.Equal(t, "closed", last.To)
			assert.Greater(t, last.AtMS, ms(p.OutageEnd))
			assert.LessOrEqual(t, last.AtMS, ms(p.OutageEnd+p.Open)+float64(p.ProbeSuccesses)*1000/p.QPS)

			assert.Equal(t, r.Requests, r.Forwarded+r.Rejected)
			// After the outage, calls are refused only until the last
			// open period ends (the recovery delay).
			halfOpen := r.Transitions[len(r.Transitions)-2]
			require.Equal(t, "open_elapsed", halfOpen.Reason)
			assert.Equal(t, int(math.Round((halfOpen.AtMS-ms(p.OutageEnd))*p.QPS/1000)), r.Rejected-r.RejectedDuringOutage)
		})
	}
}

func TestWithoutBreaker(t *testing.T) {
	p := DefaultParams()
	p.Breaker = false
	r, err := Simulate(p)
	require.NoError(t, err)
	assert.Equal(t, 2000, r.Requests)
	assert.Equal(t, 2000, r.Forwarded)
	assert.Zero(t, r.Rejected)
	assert.Equal(t, 800, r.ForwardedDuringOutage)
	assert.Equal(t, 800, r.DownstreamFailures)
	assert.Equal(t, 8.0, r.P50MS)
	assert.Equal(t, 300.0, r.P99MS)
	assert.Equal(t, 300*time.Millisecond, r.P90)
	assert.Empty(t, r.Transitions)
}

func TestDeterministic(t *testing.T) {
	a, err := Simulate(DefaultParams())
	require.NoError(t, err)
	b, err := Simulate(DefaultParams())
	require.NoError(t, err)
	assert.Equal(t, a, b)
}

func TestJSONOutput(t *testing.T) {
	for _, args := range [][]string{{"-json"}, {"-json", "-breaker=false"}} {
		var stdout, stderr bytes.Buffer
		require.Equal(t, 0, run(args, &stdout, &stderr), stderr.String())
		var out map[string]json.RawMessage
		dec := json.NewDecoder(&stdout)
		require.NoError(t, dec.Decode(&out))
		assert.False(t, dec.More(), "exactly one JSON object")
		assert.Equal(t, []string{"downstream_failures", "forwarded", "forwarded_after_outage", "forwarded_during_outage",
			"health_checks", "p50_ms", "p99_ms", "recovery_lag_ms", "rejected", "rejected_during_outage", "transitions"},
			slices.Sorted(maps.Keys(out)), args)

		var trans []map[string]any
		require.NoError(t, json.Unmarshal(out["transitions"], &trans))
		for _, tr := range trans {
			assert.Equal(t, []string{"at_ms", "from", "reason", "to"}, slices.Sorted(maps.Keys(tr)))
			assert.Contains(t, []string{"closed", "open", "half-open"}, tr["from"])
			assert.Contains(t, []string{"closed", "open", "half-open"}, tr["to"])
		}
		var forwarded int
		require.NoError(t, json.Unmarshal(out["forwarded"], &forwarded))
		if len(args) == 1 {
			assert.Len(t, trans, 9)
			assert.Equal(t, 1204, forwarded)
		} else {
			assert.Empty(t, trans)
			assert.Equal(t, "[]", string(out["transitions"]))
			assert.Equal(t, 2000, forwarded)
		}
	}
}

func TestTableOutput(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(nil, &stdout, &stderr), stderr.String())
	for _, want := range []string{"with breaker", "without", "fast-failed (0 ms)", "downstream failures",
		"p50 latency", "p99 latency", "2495 ms  closed    -> open       error_ratio",
		"6505 ms  half-open -> closed     probes_succeeded"} {
		assert.Contains(t, stdout.String(), want)
	}
	assert.Empty(t, stderr.String())
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-qps", "-1"}, {"-qps", "0"}, {"-qps", "1e9"}, {"-qps", "NaN"}, {"-duration", "0s"},
		{"-outage", "2s"}, {"-outage", "6s-2s"}, {"-outage", "x-y"}, {"-outage", "-1s-2s"},
		{"-latency-ok", "-1ms"}, {"-failure-ratio", "2"}, {"-buckets", "-1"}, {"-window", "1s", "-buckets", "3"},
		{"-open", "-1s"}, {"-bogus"}, {"stray"},
		{"-ramp", "bogus"}, {"-ramp", "doubling"}, {"-ramp-up", "-1s"}, {"-halfopen-failures", "-1"},
		{"-warmup", "-1s"}, {"-health-check", "-1s"}, {"-backoff", "0.5"}, {"-backoff", "-2"},
		{"-open", "1s", "-backoff", "2", "-max-open", "500ms"}, {"-max-open", "-1s"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, run(args, &stdout, &stderr), args)
		assert.Empty(t, stdout.String(), args)
		assert.NotEmpty(t, stderr.String(), args)
	}
}

func TestPercentile(t *testing.T) {
	v := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	assert.Equal(t, time.Duration(5), percentile(v, 50))
	assert.Equal(t, time.Duration(10), percentile(v, 99))
	assert.Equal(t, time.Duration(1), percentile(v, 0))
}

// TestBackoffFlags checks -backoff and -max-open in the outage scenario:
// each failed probe doubles the open duration, up to the cap, which the
// header states; without them the output is as before (TestTableOutput).
func TestBackoffFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"-open", "250ms", "-backoff", "2", "-max-open", "1s"}, &stdout, &stderr), stderr.String())
	assert.Contains(t, stdout.String(), "open 250ms (×2 after each failed trial, at most 1s), 1 probe(s)")

	p := DefaultParams()
	p.Open, p.Backoff, p.MaxOpen = 250*time.Millisecond, 2, time.Second
	r, err := Simulate(p)
	require.NoError(t, err)
	var waits []float64 // from each opening to the next half-open
	for i, tr := range r.Transitions[:len(r.Transitions)-1] {
		if tr.To == "open" {
			waits = append(waits, r.Transitions[i+1].AtMS-tr.AtMS)
		}
	}
	require.GreaterOrEqual(t, len(waits), 4)
	assert.Equal(t, []float64{250, 500, 1000, 1000}, waits[:4])
}

// TestPriorityScenario: at twice the bulkhead's capacity, priority
// shedding keeps P0's success at 99% or more while P3 absorbs the
// shedding, where the plain bulkhead refuses every priority alike; two
// runs print the same.
func TestPriorityScenario(t *testing.T) {
	p := DefaultPriorityParams()
	p.Duration = 10 * time.Second
	plain, err := SimulatePriority(p, false)
	require.NoError(t, err)
	shed, err := SimulatePriority(p, true)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, shed[0].SuccessPct(), 99.0, "P0 with shedding")
	assert.Zero(t, shed[0].Shed, "P0 is never shed")
	for pr := 1; pr < len(shed); pr++ {
		assert.Less(t, shed[pr].SuccessPct(), shed[pr-1].SuccessPct(), "P%d below P%d", pr, pr-1)
		assert.InDelta(t, plain[0].SuccessPct(), plain[pr].SuccessPct(), 10, "the plain bulkhead refuses P%d as P0", pr)
	}
	assert.Less(t, plain[0].SuccessPct(), 60.0, "the plain bulkhead refuses about half")
	assert.Greater(t, shed[3].Shed, shed[2].Shed, "P3 absorbs the most shedding")

	var a, b bytes.Buffer
	require.NoError(t, runPriority(p, &a))
	require.NoError(t, runPriority(p, &b))
	assert.Equal(t, a.String(), b.String(), "deterministic")
}

func TestPriorityScenarioFlags(t *testing.T) {
	var out, errs bytes.Buffer
	assert.Equal(t, 2, run([]string{"-scenario", "priority", "-reserve", "0,0.1"}, &out, &errs))
	assert.Contains(t, errs.String(), "-reserve")
	errs.Reset()
	assert.Equal(t, 2, run([]string{"-scenario", "priority", "-reserve", "0.5,0.1,0.2,0.3"}, &out, &errs))
	assert.Contains(t, errs.String(), "Priority.Reserve[0] 0.5 must be 0")
	errs.Reset()
	assert.Equal(t, 2, run([]string{"-scenario", "outage", "-reserve", "0,0.1,0.2,0.3"}, &out, &errs))
	assert.Contains(t, errs.String(), "-reserve applies to -scenario priority only")
}

// TestBreakerFlagsOnlyWhereTheyApply: the scenarios that set their own
// breakers refuse the breaker and policy flags instead of ignoring them.
func TestBreakerFlagsOnlyWhereTheyApply(t *testing.T) {
	for _, sc := range []string{"coalesce", "throttle", "priority", "adaptive", "hedge"} {
		for _, args := range [][]string{{"-window", "5s"}, {"-min-requests", "5"}, {"-health-check", "1s"}} {
			var out, errs bytes.Buffer
			assert.Equal(t, 2, run(append([]string{"-scenario", sc}, args...), &out, &errs), "%s %v", sc, args)
			assert.Contains(t, errs.String(), args[0]+" applies to -scenario outage, chain or confidence only", "%s %v", sc, args)
			assert.Empty(t, out.String())
		}
	}
}
