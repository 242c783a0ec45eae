package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sum adds up the slots of counts from from to to.
func sum(counts []int, from, to time.Duration) int {
	n := 0
	for _, v := range counts[from/slot : to/slot] {
		n += v
	}
	return n
}

func TestChainDeterministic(t *testing.T) {
	a, err := SimulateChain(DefaultChainParams())
	require.NoError(t, err)
	b, err := SimulateChain(DefaultChainParams())
	require.NoError(t, err)
	assert.Equal(t, a, b)

	p := shortChain()
	short, err := SimulateChain(p)
	require.NoError(t, err)
	p.Seed = 2
	c, err := SimulateChain(p)
	require.NoError(t, err)
	assert.NotEqual(t, short.Without.OK, c.Without.OK, "another seed draws other faults")
	assert.NotEqual(t, short.With.Hops[1].Transitions, c.With.Hops[1].Transitions)

	// The command's output too, byte for byte (a shorter run).
	args := []string{"-scenario", "chain", "-duration", "15s", "-fault", "5s-10s"}
	var out1, out2, stderr bytes.Buffer
	require.Equal(t, 0, run(args, &out1, &stderr), stderr.String())
	require.Equal(t, 0, run(args, &out2, &stderr), stderr.String())
	assert.Equal(t, out1.String(), out2.String())
}

// TestChainScenario checks what the default scenario shows. Without
// breakers the slow share saturates C's pool (0.2 × 1,200 req/s × 1 s is
// more than 200 workers), then B's and A's, whose queues fill with requests
// their callers gave up on. With breakers, both breakers open: B and C get
// almost no calls and A answers nearly every request at once, degraded. The
// breakers also refuse C's 40% good answers, so A's ok answers during the
// fault are fewer with them than in the first seconds without them: the
// breaker trades the remaining ok answers for fast degraded ones.
func TestChainScenario(t *testing.T) {
	p := DefaultChainParams()
	r, err := SimulateChain(p)
	require.NoError(t, err)
	without, with := r.Without, r.With

	for _, run := range []ChainRun{without, with} {
		assert.InDelta(t, p.Rate, run.OKBefore, 1, "healthy: every request answered ok")
		assert.Equal(t, 72000, run.Requests)
		require.Len(t, run.Hops, 3)
		assert.Equal(t, "A", run.Hops[0].Name)
		assert.InDelta(t, 1, run.Hops[0].Amplification, 1e-9)
		assert.True(t, run.Recovery.Recovered && run.RecoverySlot.Recovered)
		assert.Less(t, run.RecoverySlot.After, 2*p.Open, "recovery within a second or two")
	}

	// Without breakers: the pools saturate one after the other, and A's
	// queue holds up to the client's timeout of requests.
	for _, h := range without.Hops {
		assert.Equal(t, p.Workers, h.PeakBusy, h.Name)
		assert.Empty(t, h.Transitions, h.Name)
	}
	assert.Greater(t, without.Hops[0].PeakQueue, int(p.Rate*p.ClientTimeout.Seconds())*9/10)
	assert.Greater(t, without.Hops[2].Amplification, 0.5)
	assert.Zero(t, sum(without.Degraded, 0, p.Duration))
	lastSeconds := sum(without.OK, p.FaultEnd-10*time.Second, p.FaultEnd)
	assert.Zero(t, lastSeconds, "the last 10 s of the fault: no ok answer at all")

	// With breakers: both open within a second or so of the fault, stay
	// (nearly always) open, and close after it.
	for i, h := range with.Hops[:2] {
		require.NotEmpty(t, h.Transitions, h.Name)
		trip := h.Transitions[0]
		assert.Equal(t, "error_ratio", trip.Reason, h.Name)
		assert.InDelta(t, ms(p.FaultStart), trip.AtMS, ms(2*p.Window), h.Name)
		last := h.Transitions[len(h.Transitions)-1]
		assert.Equal(t, "closed", last.To, h.Name)
		assert.InDelta(t, ms(p.FaultEnd), last.AtMS, ms(p.Open)+ms(p.Timeout)*float64(p.ProbeSuccesses), h.Name)
		assert.Greater(t, h.NotClosed, (p.FaultEnd-p.FaultStart)*8/10, h.Name)
		assert.Less(t, with.Hops[i+1].Amplification, 0.1, "few calls reach %s", with.Hops[i+1].Name)
	}
	assert.Empty(t, with.Hops[2].Transitions)
	assert.Less(t, with.Hops[0].PeakBusy, p.Workers, "A's pool never fills")
	assert.Greater(t, with.OKDuring+with.DegradedDuring, 0.95*p.Rate, "A answers nearly every request")
	assert.Greater(t, with.DegradedDuring, 5*without.OKDuring)
	assert.Less(t, with.OKDuring, without.OKDuring)
}

// shortChain returns the default chain scenario cut to 20 s, with the
// fault from 5 s to 15 s.
func shortChain() ChainParams {
	p := DefaultChainParams()
	p.Duration, p.FaultStart, p.FaultEnd = 20*time.Second, 5*time.Second, 15*time.Second
	return p
}

// TestChainHealthy checks the model without a fault: every request is
// answered ok, every call reaches every hop, and no pool fills.
func TestChainHealthy(t *testing.T) {
	p := shortChain()
	p.Errors, p.Slow = 0, 0
	r, err := SimulateChain(p)
	require.NoError(t, err)
	for _, run := range []ChainRun{r.Without, r.With} {
		assert.InDelta(t, p.Rate, run.OKDuring, 1e-9)
		assert.Zero(t, sum(run.Failed, 0, p.Duration)+sum(run.Degraded, 0, p.Duration))
		// Each request holds an A worker for 2 + 2 + 10 ms: 1,200 req/s × 14 ms.
		assert.InDelta(t, 17, run.Hops[0].PeakBusy, 1)
		for _, h := range run.Hops {
			assert.InDelta(t, 1, h.Amplification, 1e-9, h.Name)
			assert.Zero(t, h.PeakQueue, h.Name)
			assert.Empty(t, h.Transitions, h.Name)
		}
	}
}

// TestChainPool checks the worker pool bound: 5 workers of 100 ms serve at
// most 50 calls a second, whatever the rate. A's workers wait for B's
// answers, so A's pool fills as well, and the requests wait in A's queue.
func TestChainPool(t *testing.T) {
	p := DefaultChainParams()
	p.Services, p.Rate, p.Workers, p.Duration = 2, 100, 5, 20*time.Second
	p.FaultStart, p.FaultEnd = 5*time.Second, 15*time.Second
	p.Errors, p.Slow, p.SlowLatency = 0, 1, 100*time.Millisecond
	p.Timeout, p.ClientTimeout = 2*time.Second, 3*time.Second
	r, err := SimulateChain(p)
	require.NoError(t, err)
	run := r.Without
	assert.Equal(t, 5, run.Hops[0].PeakBusy)
	assert.Equal(t, 5, run.Hops[1].PeakBusy)
	assert.Greater(t, run.Hops[0].PeakQueue, 40)
	assert.Zero(t, run.Hops[1].PeakQueue, "A never has more than 5 calls out")
	assert.LessOrEqual(t, run.OKDuring, 50.0)
	assert.Greater(t, run.OKDuring, 25.0)
}

// TestChainTimeout checks the per-hop timeout: with every answer of the
// last service slower than the timeout and workers to spare, every request
// fails during the fault, after the timeout, and none is ok.
func TestChainTimeout(t *testing.T) {
	p := shortChain()
	p.Workers, p.Errors, p.Slow = 10_000, 0, 1
	r, err := SimulateChain(p)
	require.NoError(t, err)
	run := r.Without
	assert.Zero(t, sum(run.OK, p.FaultStart+slot, p.FaultEnd),
		"no ok answer once the calls started before the fault are answered")
	// The last requests sent before the fault end are answered after it.
	failed := sum(run.Failed, p.FaultStart, p.FaultEnd+time.Second)
	assert.Equal(t, int(p.Rate*(p.FaultEnd-p.FaultStart).Seconds()), failed)
	assert.Zero(t, run.Hops[0].PeakQueue)
}

func TestChainTable(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"-scenario", "chain", "-duration", "20s", "-fault", "5s-10s"}, &stdout, &stderr),
		stderr.String())
	for _, want := range []string{
		"chain A -> B -> C: 1200 req/s into A", "fault 5s-10s: C answers 40% errors (in 10ms) and 20% slow (in 1s); seed 1",
		"without  with breakers", "A ok answers/s, during the fault", "amplification at C, during the fault",
		"recovery after the fault, 100 ms buckets", "peak busy workers / queue at B", "breaker B->C not closed",
	} {
		assert.Contains(t, stdout.String(), want)
	}
	assert.Empty(t, stderr.String())
}

func TestChainSVG(t *testing.T) {
	name := filepath.Join(t.TempDir(), "chain.svg")
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"-scenario", "chain", "-duration", "20s", "-fault", "5s-10s", "-svg", name},
		&stdout, &stderr), stderr.String())
	assert.Contains(t, stdout.String(), "amplification", "the table too")
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
	for _, want := range []string{"Chain A → B → C: A's ok answers per second", "A→B", "B→C", "open", "half-open",
		"ok, without breakers", "ok, with breakers", "fault of C", "20s"} {
		assert.Contains(t, all, want)
	}
}

func TestChainBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-scenario", "other"}, {"-scenario", "chain", "-qps", "10"}, {"-scenario", "chain", "-outage", "1s-2s"},
		{"-scenario", "chain", "-json"}, {"-rate", "10"}, {"-svg", "x.svg"}, {"-seed", "3"},
		{"-scenario", "chain", "-services", "1"}, {"-scenario", "chain", "-rate", "0"},
		{"-scenario", "chain", "-rate", "1e9"}, {"-scenario", "chain", "-workers", "0"},
		{"-scenario", "chain", "-duration", "1500ms"}, {"-scenario", "chain", "-duration", "0s"},
		{"-scenario", "chain", "-fault", "1s-5s"}, {"-scenario", "chain", "-fault", "20s-60s"},
		{"-scenario", "chain", "-fault", "20500ms-30s"}, {"-scenario", "chain", "-fault", "30s-20s"},
		{"-scenario", "chain", "-fault", "x"}, {"-scenario", "chain", "-errors", "0.7", "-slow", "0.5"},
		{"-scenario", "chain", "-errors", "-0.1"}, {"-scenario", "chain", "-slowlatency", "-1s"},
		{"-scenario", "chain", "-timeout", "0s"}, {"-scenario", "chain", "-client-timeout", "0s"},
		{"-scenario", "chain", "-work", "-1ms"}, {"-scenario", "chain", "-latency", "-1ms"},
		{"-scenario", "chain", "-failure-ratio", "2"}, {"-scenario", "chain", "-open", "-1s"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, run(args, &stdout, &stderr), args)
		assert.Empty(t, stdout.String(), args)
		assert.NotEmpty(t, stderr.String(), args)
	}

	// A chart that cannot be written is a failure of the run, not of the flags.
	var stdout, stderr bytes.Buffer
	bad := filepath.Join(t.TempDir(), "missing", "chain.svg")
	assert.Equal(t, 1, run([]string{"-scenario", "chain", "-duration", "5s", "-fault", "2s-3s", "-svg", bad},
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
