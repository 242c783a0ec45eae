package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// defaultChain is the default chain scenario's result, computed once for
// the tests that check it (a run takes seconds under -race).
var defaultChain = sync.OnceValues(func() (ChainResult, error) { return SimulateChain(DefaultChainParams()) })

// smallChain returns the default scenario scaled down a quarter (rate,
// threads and queue) and cut to 20 s with the fault from 5 s to 12 s, and
// breakers open 5 s (doubling to 10 s), for the tests of one mechanism.
func smallChain() ChainParams {
	p := DefaultChainParams()
	p.Rate, p.Workers, p.Queue = 300, 50, 2475
	p.Duration, p.FaultStart, p.FaultEnd = 20*time.Second, 5*time.Second, 12*time.Second
	p.Open, p.MaxOpen = 5*time.Second, 10*time.Second
	return p
}

// simulate runs p, failing the test on an error.
func simulate(t *testing.T, p ChainParams) ChainResult {
	t.Helper()
	r, err := SimulateChain(p)
	require.NoError(t, err)
	return r
}

// breaker returns the run's breaker named name.
func breaker(t *testing.T, run ChainRun, name string) BreakerRun {
	t.Helper()
	for _, b := range run.Breakers {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("no breaker %q in %v", name, run.Breakers)
	return BreakerRun{}
}

// chainOutput runs the command with args, failing the test unless it exits 0.
func chainOutput(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(append([]string{"-scenario", "chain"}, args...), &stdout, &stderr), stderr.String())
	assert.Empty(t, stderr.String())
	return stdout.String()
}

// TestChainDeterministic checks that a run is a function of its
// parameters: the same result twice, the same output byte for byte, on one
// processor or several (the threads are goroutines), and other draws with
// another seed.
func TestChainDeterministic(t *testing.T) {
	p := smallChain()
	a, b := simulate(t, p), simulate(t, p)
	assert.Equal(t, a, b)
	p.Seed = 2
	c := simulate(t, p)
	assert.NotEqual(t, a.Without.OK, c.Without.OK, "another seed draws other faults")

	args := []string{"-rate", "300", "-workers", "50", "-duration", "20s", "-fault", "5s-12s", "-health-check", "1s"}
	out := chainOutput(t, args...)
	for _, procs := range []int{1, 4} {
		prev := runtime.GOMAXPROCS(procs)
		again := chainOutput(t, args...)
		runtime.GOMAXPROCS(prev)
		assert.Equal(t, out, again, "GOMAXPROCS %d", procs)
	}

	// The default run, as docs/chain-replay.md prints it (once more under
	// -race would cost seconds; the mechanism is the one checked above).
	if !raceEnabled {
		assert.Equal(t, chainOutput(t), chainOutput(t))
	}
}

// TestChainDefaults checks what docs/chain-replay.md says of the default
// run.
func TestChainDefaults(t *testing.T) {
	p := DefaultChainParams()
	r, err := defaultChain()
	require.NoError(t, err)
	wo, wi := r.Without, r.With
	history := (1 - p.StockShare) * p.Rate
	for _, run := range []ChainRun{wo, wi} {
		assert.InDelta(t, p.Rate, run.OKBefore, 1, "healthy before the fault")
		assert.Equal(t, 72000, run.Requests)
		require.Len(t, run.Hops, 3)
	}

	// Without breakers: the gateway's pool fills, its queue outgrows the
	// client's timeout and the ok answers stop; history, which never calls
	// inventory, starves with the rest; the retries multiply the calls.
	assert.Greater(t, wo.Hops[hopGateway].Full, 0.9)
	assert.Greater(t, wo.Hops[hopOrder].MeanBusy, 0.9*float64(p.Workers))
	assert.Zero(t, wo.OKLowest)
	assert.Zero(t, wo.DegradedDuring)
	assert.Less(t, wo.HistoryOKDuring, 0.5*history)
	assert.Greater(t, wo.Hops[hopInventory].PerCall, 1.8)
	assert.Greater(t, wo.Hops[hopOrder].PerCall, 1.05)
	assert.Empty(t, wo.Breakers)
	assert.Equal(t, time.Duration(0), wo.Recovery.After)

	// With breakers: order's breakers on inventory open on the error ratio
	// once the 5 s window's failures reach half, stay open 30 s, and close
	// after the fault; the gateway's never open; history is untouched
	// after the trip and the entry answers everything, half degraded.
	for _, name := range []string{"order: inventory", "order: inventory/stock"} {
		b := breaker(t, wi, name)
		require.Len(t, b.Transitions, 3, name)
		trip, half, closed := b.Transitions[0], b.Transitions[1], b.Transitions[2]
		assert.Equal(t, "error_ratio", trip.Reason)
		assert.Equal(t, 30*time.Second, trip.OpenFor)
		assert.Greater(t, trip.AtMS, ms(p.FaultStart))
		assert.Less(t, trip.AtMS, ms(p.FaultStart+p.Window))
		assert.Equal(t, "open_elapsed", half.Reason)
		assert.InDelta(t, trip.AtMS+ms(p.Open), half.AtMS, 1)
		assert.Equal(t, "probes_succeeded", closed.Reason)
		assert.Greater(t, closed.AtMS, ms(p.FaultEnd))
	}
	for _, name := range []string{"gateway: order", "gateway: order/stock", "gateway: order/history"} {
		assert.Empty(t, breaker(t, wi, name).Transitions, name)
	}
	assert.Equal(t, 600, wi.OKLowest)
	assert.InDelta(t, history, wi.HistoryOKDuring, 1)
	assert.Greater(t, wi.OKDuring+wi.DegradedDuring, 0.99*p.Rate)
	assert.Less(t, wi.Hops[hopInventory].Amplification, wo.Hops[hopInventory].Amplification/4)
	assert.True(t, wi.Recovery.Recovered)
	assert.Greater(t, wi.Recovery.After, 10*time.Second, "the breakers close 30 s after the trip")
}

// TestChainHealthy checks the model without a fault: every request is
// answered ok, one call per request per hop (inventory only for stock),
// no retry, no queue, and the gateway's threads busy as many as the rate
// times a request's time there.
func TestChainHealthy(t *testing.T) {
	p := smallChain()
	p.Errors, p.Slow = 0, 0
	r := simulate(t, p)
	for _, run := range []ChainRun{r.Without, r.With} {
		assert.InDelta(t, p.Rate, run.OKDuring, 1e-9)
		assert.Zero(t, sum(run.Failed, 0, p.Duration)+sum(run.Degraded, 0, p.Duration))
		assert.InDelta(t, 1, run.Hops[hopOrder].Amplification, 1e-9)
		assert.InDelta(t, p.StockShare, run.Hops[hopInventory].Amplification, 1e-3)
		for _, h := range run.Hops[1:] {
			assert.InDelta(t, 1, h.PerCall, 1e-9, h.Name)
		}
		for _, h := range run.Hops {
			assert.Zero(t, h.PeakQueue, h.Name)
			assert.Zero(t, h.Refused, h.Name)
		}
		// A stock request holds a gateway thread 2 + 2 + 10 ms, a history
		// one 2 + 2 ms: 300 req/s × 9 ms = 2.7 on average.
		assert.InDelta(t, 2.7, run.Hops[hopGateway].MeanBusy, 0.1)
		for _, b := range run.Breakers {
			assert.Empty(t, b.Transitions, b.Name)
		}
	}
}

// TestChainRetriesAmplify checks that the calls reaching a hop come from
// the callers' retries: with errors only (a share e of the calls to
// inventory) and threads to spare, order makes 1 + e + e² attempts per
// call with 2 retries, 1 + e with one, 1 with none; the gateway retries
// order's errors the same way, which only stock calls get, when all of
// order's attempts failed (p = e^(retries+1)): 1 + share × (p + … + p^retries).
func TestChainRetriesAmplify(t *testing.T) {
	for retries, want := range []float64{1, 1.4, 1.56} {
		p := smallChain()
		p.Errors, p.Slow, p.Retries, p.Workers = 0.4, 0, retries, 10_000
		run := simulate(t, p).Without
		assert.InDelta(t, want, run.Hops[hopInventory].PerCall, 0.02, "retries %d", retries)
		fail := 1.0 // p
		for range retries + 1 {
			fail *= p.Errors
		}
		gw, q := 1.0, 1.0
		for range retries {
			q *= fail
			gw += p.StockShare * q
		}
		assert.InDelta(t, gw, run.Hops[hopOrder].PerCall, 0.01, "retries %d", retries)
	}
}

// TestChainTimeouts checks the callers' timeouts: a delayed call ends at
// the caller's timeout, not when its answer comes; and a caller whose
// timeout is shorter than its callee's leaves the callee's threads working
// for nobody.
func TestChainTimeouts(t *testing.T) {
	p := smallChain()
	p.Errors, p.Slow, p.Retries, p.Workers = 0, 1, 0, 10_000
	run := simulate(t, p).Without
	assert.Zero(t, sum(run.Failed, p.FaultStart, p.FaultStart+p.OrderTimeout), "no answer before order's timeout")
	failed := sum(run.Failed, p.FaultStart+p.OrderTimeout, p.FaultEnd+p.OrderTimeout+slot)
	assert.InDelta(t, p.StockShare*p.Rate*(p.FaultEnd-p.FaultStart).Seconds(), failed, 1,
		"every stock request fails, history ones are ok")
	assert.InDelta(t, (1-p.StockShare)*p.Rate, run.HistoryOKDuring, 1e-9)

	// By default order's timeout is within the gateway's, so the gateway
	// waits for each of order's threads; the other way round order's threads
	// outlast the gateway's.
	assert.LessOrEqual(t, run.Hops[hopOrder].MeanBusy, run.Hops[hopGateway].MeanBusy)
	p.GatewayTimeout = p.OrderTimeout / 2
	run = simulate(t, p).Without
	assert.Greater(t, run.Hops[hopOrder].MeanBusy, 1.5*run.Hops[hopGateway].MeanBusy)
}

// TestChainPools checks the thread pools and queues: busy threads never
// exceed Workers, waiting requests never exceed Queue, beyond which calls
// are refused; and a pool is shared by the endpoints: with no request for
// stock, the fault touches nobody.
func TestChainPools(t *testing.T) {
	p := smallChain()
	p.Queue = 0
	run := simulate(t, p).Without
	for _, h := range run.Hops {
		assert.LessOrEqual(t, h.PeakBusy, p.Workers, h.Name)
		assert.Zero(t, h.PeakQueue, h.Name)
	}
	assert.Equal(t, p.Workers, run.Hops[hopGateway].PeakBusy)
	assert.Positive(t, run.Hops[hopGateway].Refused)

	p = smallChain()
	p.StockShare = 0
	r := simulate(t, p)
	for _, run := range []ChainRun{r.Without, r.With} {
		assert.InDelta(t, p.Rate, run.OKDuring, 1e-9)
		assert.Zero(t, run.Hops[hopInventory].Calls)
	}
}

// TestChainBackoff checks -backoff and -max-open: the open duration doubles
// after each failed probe up to the cap, and stays put without backoff.
func TestChainBackoff(t *testing.T) {
	p := smallChain()
	p.Open, p.MaxOpen, p.FaultEnd, p.Duration = 2*time.Second, 5*time.Second, 27*time.Second, 35*time.Second
	opens := func(p ChainParams) []time.Duration {
		var out []time.Duration
		for _, tr := range breaker(t, simulate(t, p).With, "order: inventory").Transitions {
			if tr.To == "open" {
				out = append(out, tr.OpenFor)
			}
		}
		return out
	}
	got := opens(p)
	require.GreaterOrEqual(t, len(got), 4)
	assert.Equal(t, []time.Duration{2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}, got[:4])
	p.Backoff = 1
	for _, d := range opens(p) {
		assert.Equal(t, 2*time.Second, d)
	}
}

// TestChainHealthCheck checks -health-check in the chain: a passing check
// turns an open breaker half-open without waiting out the open duration, so
// the breakers close within a check interval (and the probes) of the
// fault's end instead of up to an open duration after it.
func TestChainHealthCheck(t *testing.T) {
	p := smallChain()
	p.Open, p.MaxOpen, p.Duration = 15*time.Second, 15*time.Second, 30*time.Second
	without := simulate(t, p).With
	p.HealthCheck = time.Second
	with := simulate(t, p).With
	assert.Zero(t, without.HealthChecks)
	assert.Positive(t, with.HealthChecks)
	for _, name := range []string{"order: inventory", "order: inventory/stock"} {
		last := func(run ChainRun) BreakerTransition {
			ts := breaker(t, run, name).Transitions
			require.NotEmpty(t, ts)
			return ts[len(ts)-1]
		}
		assert.Equal(t, "closed", last(without).To)
		assert.Greater(t, last(without).AtMS, ms(p.FaultEnd+5*time.Second), "waits out the open duration")
		assert.Equal(t, "closed", last(with).To)
		assert.InDelta(t, ms(p.FaultEnd), last(with).AtMS, ms(p.HealthCheck)+200, name)
		reasons := map[string]bool{}
		for _, tr := range breaker(t, with, name).Transitions {
			reasons[tr.Reason] = true
		}
		assert.True(t, reasons["health_check"], name)
	}
	assert.Less(t, with.Recovery.After, without.Recovery.After)
}

// TestChainFallbackAndBudget checks -fallback=false (a refused or failed
// call is an error, never degraded) and -retry-budget (fewer retries reach
// inventory than without a budget).
func TestChainFallbackAndBudget(t *testing.T) {
	p := smallChain()
	p.Fallback = false
	with := simulate(t, p).With
	assert.Zero(t, sum(with.Degraded, 0, p.Duration))
	assert.Positive(t, sum(with.Failed, p.FaultStart, p.FaultEnd))

	p = smallChain()
	free := simulate(t, p).Without.Hops[hopInventory].PerCall
	p.RetryBudget = 0.1
	budgeted := simulate(t, p).Without.Hops[hopInventory].PerCall
	assert.Less(t, budgeted, free-0.3)
	assert.GreaterOrEqual(t, budgeted, 1.0)
}

// TestChainBreakerFlags checks the chain's own breaker defaults (the
// source's) and that the flags override them; the outage scenario keeps
// its own (TestTableOutput).
func TestChainBreakerFlags(t *testing.T) {
	short := []string{"-rate", "100", "-workers", "20", "-duration", "12s", "-fault", "5s-8s"}
	out := chainOutput(t, short...)
	assert.Contains(t, out, "window 5s in 10 buckets, min 20 requests, failure ratio 0.5,")
	assert.Contains(t, out, "open 30s (×2 after each failed trial, at most 1m0s), 1 probe(s), 3 successes to close")
	out = chainOutput(t, append(short, "-open", "2s", "-backoff", "1", "-window", "1s")...)
	assert.Contains(t, out, "window 1s in 10 buckets")
	assert.Contains(t, out, "open 2s, 1 probe(s)")
	out = chainOutput(t, append(short, "-open", "2s", "-max-open", "3s")...)
	assert.Contains(t, out, "open 2s (×2 after each failed trial, at most 3s)")
}

func TestChainTable(t *testing.T) {
	out := chainOutput(t, "-rate", "300", "-workers", "50", "-duration", "30s", "-fault", "10s-20s", "-health-check", "2s")
	for _, want := range []string{
		"chain gateway -> order -> inventory, replayed on a virtual clock through bulwark's command groups",
		"entry: 300 req/s into gateway, evenly spaced, for 30s; 50.0% for order's stock endpoint",
		"services: 50 threads each, shared by all its endpoints, and a queue of 9900 beyond them",
		"timeouts: client on gateway 5s, gateway on order 3s, order on inventory 1s",
		"retries: gateway and order retry a failed or timed-out call 2 times, backoff from 50ms",
		"fault 10s-20s in front of inventory: 40.0% of the calls refused at once with an error, 20.0% delayed 2s; seed 1",
		"health check every 2s while open",
		"without breakers           with breakers", "source        model     source        model",
		"entry ok answers/s in the fault: mean              150.0+", "948.0*", "79.0%*", "12.5%+", "8.0x+",
		"of them for history (never calls inventory)", "order: threads busy, mean / time all busy       saturated",
		"attempts per call, order -> inventory", "calls reaching inventory per entry request",
		`the entry "fell from 1200 to 150" (its "8x amplification")`, "lost 21.0% with breakers",
		"recovery after the fault (1 s buckets)", "breaker order: inventory/stock, not closed", "health checks run",
		"transitions (with breakers, virtual time):", "  order: inventory:", "closed    -> open       error_ratio (open 30s)",
	} {
		assert.Contains(t, out, want)
	}
}

func TestChainSVG(t *testing.T) {
	name := filepath.Join(t.TempDir(), "chain.svg")
	out := chainOutput(t, "-rate", "300", "-workers", "50", "-duration", "30s", "-fault", "10s-20s", "-svg", name)
	assert.Contains(t, out, "calls reaching inventory", "the table too")
	data, err := os.ReadFile(name)
	require.NoError(t, err)

	dec := xml.NewDecoder(bytes.NewReader(data))
	counts := map[string]int{}
	var texts []string
	var inText bool
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		switch tok := tok.(type) {
		case xml.StartElement:
			counts[tok.Name.Local]++
			inText = tok.Name.Local == "text"
			if counts["svg"] == 1 && tok.Name.Local == "svg" {
				assert.Equal(t, "http://www.w3.org/2000/svg", tok.Name.Space)
			}
		case xml.CharData:
			if inText {
				texts = append(texts, string(tok))
			}
		case xml.EndElement:
			inText = false
		}
	}
	assert.Equal(t, 1, counts["svg"])
	assert.Equal(t, 3, counts["polyline"], "ok without, ok with, degraded with")
	all := strings.Join(texts, "\n")
	for _, want := range []string{"Chain gateway → order → inventory: the gateway's ok answers per second",
		"gateway: order/history", "order: inventory/stock", "open", "half-open", "ok, without breakers",
		"ok, with breakers", "fault in front of inventory", "30s", "a queue drains"} {
		assert.Contains(t, all, want)
	}
}

func TestChainBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-scenario", "other"}, {"-scenario", "chain", "-qps", "10"}, {"-scenario", "chain", "-outage", "1s-2s"},
		{"-scenario", "chain", "-json"}, {"-rate", "10"}, {"-svg", "x.svg"}, {"-seed", "3"}, {"-retries", "1"},
		{"-scenario", "chain", "-rate", "0"}, {"-scenario", "chain", "-rate", "1e9"},
		{"-scenario", "chain", "-workers", "0"}, {"-scenario", "chain", "-queue", "-1"},
		{"-scenario", "chain", "-stock-share", "1.5"},
		{"-scenario", "chain", "-duration", "1500ms"}, {"-scenario", "chain", "-duration", "0s"},
		{"-scenario", "chain", "-fault", "1s-5s"}, {"-scenario", "chain", "-fault", "20s-60s"},
		{"-scenario", "chain", "-fault", "20500ms-30s"}, {"-scenario", "chain", "-fault", "30s-20s"},
		{"-scenario", "chain", "-fault", "x"}, {"-scenario", "chain", "-errors", "0.7", "-slow", "0.5"},
		{"-scenario", "chain", "-errors", "-0.1"}, {"-scenario", "chain", "-delay", "-1s"},
		{"-scenario", "chain", "-client-timeout", "0s"}, {"-scenario", "chain", "-gateway-timeout", "0s"},
		{"-scenario", "chain", "-order-timeout", "-1s"}, {"-scenario", "chain", "-retries", "-1"},
		{"-scenario", "chain", "-retries", "10"}, {"-scenario", "chain", "-retry-backoff", "2s"},
		{"-scenario", "chain", "-retry-budget", "2"},
		{"-scenario", "chain", "-work", "-1ms"}, {"-scenario", "chain", "-latency", "-1ms"},
		{"-scenario", "chain", "-failure-ratio", "2"}, {"-scenario", "chain", "-open", "-1s"},
		{"-scenario", "chain", "-backoff", "0.5"}, {"-scenario", "chain", "-max-open", "10s"},
		{"-scenario", "chain", "-health-check", "-1s"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, run(args, &stdout, &stderr), args)
		assert.Empty(t, stdout.String(), args)
		assert.NotEmpty(t, stderr.String(), args)
	}

	// A chart that cannot be written is a failure of the run, not of the flags.
	var stdout, stderr bytes.Buffer
	bad := filepath.Join(t.TempDir(), "missing", "chain.svg")
	assert.Equal(t, 1, run([]string{"-scenario", "chain", "-rate", "10", "-duration", "5s", "-fault", "2s-3s", "-svg", bad},
		&stdout, &stderr))
	assert.Contains(t, stderr.String(), "chain.svg")
}

func TestNiceCeil(t *testing.T) {
	for v, want := range map[float64]float64{1200: 2000, 3300: 4000, 4500: 5000, 900: 1000, 1: 1, 81: 100} {
		assert.Equal(t, want, niceCeil(v), v)
	}
}

func BenchmarkChain(b *testing.B) {
	p := DefaultChainParams()
	for b.Loop() {
		if _, err := SimulateChain(p); err != nil {
			b.Fatal(err)
		}
	}
}

// TestChainDocsUpToDate checks that docs/chain-replay.md shows the default
// run's table as the command prints it, and that docs/chain.svg is its
// chart: regenerate both with the command in the page when the model
// changes.
func TestChainDocsUpToDate(t *testing.T) {
	r, err := defaultChain()
	require.NoError(t, err)
	var table, chart bytes.Buffer
	require.NoError(t, printChainTable(&table, DefaultChainParams(), r))
	writeChart(&chart, DefaultChainParams(), r)

	page, err := os.ReadFile("../../docs/chain-replay.md")
	require.NoError(t, err)
	const intro = "`go run ./examples/simulate -scenario chain -svg docs/chain.svg`:\n\n```\n"
	_, block, ok := strings.Cut(string(page), intro)
	require.True(t, ok, "the page introduces the table with %q", intro)
	block, _, ok = strings.Cut(block, "```\n")
	require.True(t, ok)
	assert.Equal(t, strings.TrimRight(table.String(), "\n"), strings.TrimRight(block, "\n"))

	svg, err := os.ReadFile("../../docs/chain.svg")
	require.NoError(t, err)
	assert.Equal(t, chart.String(), string(svg))
}
