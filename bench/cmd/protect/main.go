// Command protect measures how well each library protects a live service from a sick dependency.
//
// Everything runs in this process on loopback (127.0.0.1) and stops by itself:
//   - a backend with two routes, /healthy and /faulty; fault injection on /faulty can be switched
//     during the run (40% of calls answered 500 at once, 30% hanging 2 s, far beyond the caller's
//     timeout);
//   - a front service with two endpoints, each calling the backend route of the same name through
//     the library under test, over one shared HTTP client whose connection pool is capped, so a
//     sick route can starve the healthy one unless the library isolates them;
//   - an open-loop load generator sending a fixed rate to each endpoint.
//
// Phases: healthy (5 s), fault (20 s), recovered (5 s). For each library it records per phase and
// endpoint the achieved good throughput, p50/p99 latency, fallback and error counts and the calls
// that reached /faulty, and how long after the fault ended /faulty answered well again (the first
// of recoveryStreak good answers in a row), and prints markdown tables on stdout, ending with the
// targets of bulwark's recommended preset (command.Preset("dependency")) against the best peer.
//
//	go run ./cmd/protect          # about 3 minutes for all libraries
//	go run ./cmd/protect -quick   # 1.5 s phases and a 3 s fault, about 40 s
//	go run ./cmd/protect -rounds 5 -only failsafe,hystrix,preset   # targets on medians of 5 rounds
package main

import (
	"cmp"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bulwark-go/bulwark/bench/internal/stat"
)

// The scenario. Every library gets the same limits.
const (
	callTimeout       = 250 * time.Millisecond // per backend call
	serviceTime       = 2 * time.Millisecond   // backend work per call
	faultHang         = 2 * time.Second        // during the fault, how long a hanging call takes
	faultHangRate     = 0.3                    // during the fault, share of calls that hang
	faultErrorRate    = 0.4                    // during the fault, answered 500 at once
	frontConns        = 20                     // the front's shared connection pool (MaxConnsPerHost)
	bulkheadSize      = 10                     // per endpoint, for the libraries that have one
	minRequests       = 20                     // breaker: volume before any verdict
	failureRatio      = 0.5                    // breaker: trip threshold
	openDuration      = time.Second            // breaker: open (sleep window) before a probe
	halfOpenSuccesses = 3                      // breaker: probe successes to close (bulwark's default; hystrix-go: 1)
	breakerWindow     = time.Second            // breaker: rolling window (hystrix-go: fixed 10 s)
	recoveryStreak    = 20                     // good answers in a row that count as recovered
)

const (
	numPhases    = 3
	numEndpoints = 2
	epHealthy    = 0
	epFaulty     = 1
)

var (
	phaseNames    = [numPhases]string{"healthy", "fault", "recovered"}
	endpointNames = [numEndpoints]string{"healthy", "faulty"}
)

type config struct {
	phase, fault, warmup time.Duration
	rate                 int
}

// length returns how long phase i lasts.
func (c config) length(i int) time.Duration {
	if phaseNames[i] == "fault" {
		return c.fault
	}
	return c.phase
}

// result is what one library's run produced.
type result struct {
	name      string
	records   []record
	hits      [numPhases]int64
	firstOpen time.Duration // after the start of the fault phase; -1 if the faulty endpoint never short-circuited
	faultEnd  time.Time
}

func main() {
	quick := flag.Bool("quick", false, "short phases (1.5 s, fault 3 s) for a smoke run")
	phase := flag.Duration("phase", 5*time.Second, "length of the healthy and the recovered phase")
	faultLen := flag.Duration("fault", 20*time.Second, "length of the fault phase")
	rate := flag.Int("rate", 200, "requests per second per endpoint")
	only := flag.String("only", "", "run only the libraries whose name contains one of these comma-separated strings")
	rounds := flag.Int("rounds", 1, "run the libraries this many times in turns (round r starts with the r-th one) and judge the targets on the medians")
	flag.Parse()
	if *rounds < 1 {
		fmt.Fprintf(os.Stderr, "protect: -rounds %d: must be at least 1\n", *rounds)
		os.Exit(2)
	}
	cfg := config{phase: *phase, fault: *faultLen, warmup: time.Second, rate: *rate}
	if *quick {
		cfg.phase, cfg.fault, cfg.warmup = 1500*time.Millisecond, 3*time.Second, 300*time.Millisecond
	}

	var picked []func() protection
	for _, mk := range append(peerProtections(), bulwarkProtections()...) {
		if selected(mk().name, *only) {
			picked = append(picked, mk)
		}
	}
	results := make([][]result, *rounds) // results[round][library], libraries in picked's order
	for r := range results {
		results[r] = make([]result, len(picked))
		for k := range picked {
			i := (k + r) % len(picked)
			p := picked[i]()
			fmt.Fprintf(os.Stderr, "protect: round %d: %s ...\n", r+1, p.name)
			res, err := run(p, cfg)
			if err != nil {
				fmt.Fprintln(os.Stderr, "protect:", p.name, err)
				os.Exit(1)
			}
			results[r][i] = res
		}
	}
	report(results, cfg)
}

// selected reports whether the -only flag's value picks the library name: an empty value picks
// all, otherwise any of its comma-separated parts contained in name.
func selected(name, only string) bool {
	if only == "" {
		return true
	}
	for _, part := range strings.Split(only, ",") {
		if part != "" && strings.Contains(name, part) {
			return true
		}
	}
	return false
}

func listen(h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, "http://" + ln.Addr().String(), nil
}

func run(p protection, cfg config) (result, error) {
	res := result{name: p.name, firstOpen: -1}
	b := &backend{serviceTime: serviceTime}
	bsrv, burl, err := listen(b.handler())
	if err != nil {
		return res, err
	}
	defer bsrv.Close()

	tr := &http.Transport{MaxConnsPerHost: frontConns, MaxIdleConnsPerHost: frontConns, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	f := &front{client: &http.Client{Transport: tr}, backendURL: burl}
	var calls [numEndpoints]call
	for i, name := range endpointNames {
		if calls[i], err = p.wrap(name, f.do(name)); err != nil {
			return res, err
		}
	}
	if p.closeAll != nil {
		defer p.closeAll()
	}
	fsrv, furl, err := listen(f.handler(calls))
	if err != nil {
		return res, err
	}
	defer fsrv.Close()

	gtr := &http.Transport{MaxIdleConnsPerHost: 1024, IdleConnTimeout: 30 * time.Second}
	defer gtr.CloseIdleConnections()
	g := &loadGen{client: &http.Client{Transport: gtr, Timeout: 5 * time.Second}, baseURL: furl, rate: cfg.rate}

	b.phase.Store(-1)
	g.run(-1, cfg.warmup)
	var faultStart time.Time
	for i := range numPhases {
		b.phase.Store(int32(i))
		switch phaseNames[i] {
		case "fault":
			b.fault.Store(&fault{errorRate: faultErrorRate, hangRate: faultHangRate, hang: faultHang})
			faultStart = time.Now()
		default:
			b.fault.Store(nil)
			if i > 0 && phaseNames[i-1] == "fault" {
				res.faultEnd = time.Now()
			}
		}
		g.run(i, cfg.length(i))
	}
	g.wait()
	for i := range numPhases {
		res.hits[i] = b.hits[i+1].Load()
	}
	if t := f.firstOpen[epFaulty].Load(); t != 0 {
		res.firstOpen = time.Unix(0, t).Sub(faultStart)
	}
	res.records = g.records
	return res, nil
}

// cell is one phase × endpoint of a result.
type cell struct {
	sent, ok, fallback, errs int
	reasons                  map[string]int
	p50, p99                 time.Duration
	okPerSec                 float64
}

func summarize(r result, phase, ep int, cfg config) cell {
	c := cell{reasons: map[string]int{}}
	var lat []time.Duration
	for _, rec := range r.records {
		if rec.phase != phase || rec.endpoint != ep {
			continue
		}
		c.sent++
		lat = append(lat, rec.latency)
		if rec.reason != "" {
			c.reasons[rec.reason]++
		}
		switch rec.outcome {
		case "ok":
			c.ok++
		case "fallback":
			c.fallback++
		default:
			c.errs++
		}
	}
	c.p50, c.p99 = stat.Percentile(lat, 50), stat.Percentile(lat, 99)
	c.okPerSec = float64(c.ok) / cfg.length(phase).Seconds()
	return c
}

// fallbackAfterOpen returns the in-handler and end-to-end latencies of the faulty endpoint's
// fallback answers to calls that began after its first short-circuit.
func fallbackAfterOpen(r result) (took, e2e []time.Duration) {
	for _, rec := range r.records {
		if rec.endpoint == epFaulty && rec.outcome == "fallback" && rec.afterOpen {
			took = append(took, rec.took)
			e2e = append(e2e, rec.latency)
		}
	}
	return took, e2e
}

// recovery returns how long after the fault ended /faulty began answering well again: the scheduled
// time of the first of recoveryStreak good answers in a row, in the order the requests were due;
// -1 if that never happened in the recovered phase.
func recovery(r result) time.Duration {
	var recs []record
	for _, rec := range r.records {
		if rec.endpoint == epFaulty && phaseNames[rec.phase] == "recovered" {
			recs = append(recs, rec)
		}
	}
	slices.SortFunc(recs, func(a, b record) int { return a.scheduled.Compare(b.scheduled) })
	run := 0
	for i, rec := range recs {
		if rec.outcome != "ok" {
			run = 0
			continue
		}
		if run++; run == recoveryStreak {
			return recs[i-recoveryStreak+1].scheduled.Sub(r.faultEnd)
		}
	}
	return -1
}

// report prints the scenario, every library's tables when there is one round, each round's
// summary, and the preset's targets on the medians of the rounds.
func report(rounds [][]result, cfg config) {
	fmt.Printf("Scenario: %d req/s per endpoint, open loop, phases healthy %v, fault %v, recovered %v after %v of warm-up. "+
		"Backend service time %v. Fault on /faulty: %.0f%% answered 500 at once, %.0f%% hang %v, the rest answered well. "+
		"Per call timeout %v; the front's shared connection pool holds %d connections. "+
		"Libraries: bulkhead %d per endpoint, breaker at %.0f%% failures over >= %d calls in a %v window (hystrix-go: 10 s, fixed), open %v, closes after %d probe successes (hystrix-go: 1), fallback answers a static value; "+
		"bulwark (preset) is command.Preset(\"dependency\") with the same timeout and bulkhead. "+
		"Recovery: from the end of the fault to the first of %d good answers in a row from /faulty.\n\n",
		cfg.rate, cfg.phase, cfg.fault, cfg.phase, cfg.warmup, serviceTime, faultErrorRate*100, faultHangRate*100, faultHang,
		callTimeout, frontConns, bulkheadSize, failureRatio*100, minRequests, breakerWindow, openDuration, halfOpenSuccesses,
		recoveryStreak)

	if len(rounds) == 1 {
		details(rounds[0], cfg)
	}
	for r, results := range rounds {
		fmt.Printf("#### Summary, round %d of %d\n\n", r+1, len(rounds))
		summary(results, cfg)
	}
	targetsOverRounds(rounds, cfg)
}

// details prints each library's table of phases and endpoints.
func details(results []result, cfg config) {
	for _, r := range results {
		fmt.Printf("#### %s\n\n", r.name)
		var rows [][]string
		for ph := range numPhases {
			for ep := range numEndpoints {
				c := summarize(r, ph, ep, cfg)
				hits := "-"
				if ep == epFaulty {
					hits = strconv.FormatInt(r.hits[ph], 10)
				}
				rows = append(rows, []string{phaseNames[ph], endpointNames[ep], strconv.Itoa(c.sent),
					fmt.Sprintf("%.1f", c.okPerSec), strconv.Itoa(c.fallback), strconv.Itoa(c.errs),
					reasons(c.reasons), stat.Ms(c.p50), stat.Ms(c.p99), hits})
			}
		}
		stat.Table(os.Stdout, []string{"phase", "endpoint", "sent", "good answers/s", "fallbacks", "errors",
			"why (short-circuit/rejected/timeout/error)", "p50 ms", "p99 ms", "calls reaching /faulty"}, rows)
		fmt.Println()
	}
}

// summary prints one row per library of what the targets and the reader look at.
func summary(results []result, cfg config) {
	var rows [][]string
	for _, r := range results {
		hh, hf := summarize(r, 0, epHealthy, cfg), summarize(r, 1, epHealthy, cfg)
		fr := summarize(r, 2, epFaulty, cfg)
		open := "never"
		if r.firstOpen >= 0 {
			open = stat.Ms(r.firstOpen)
		}
		took, e2e := fallbackAfterOpen(r)
		fb := "-"
		if len(took) > 0 {
			fb = fmt.Sprintf("%d: %s / %s", len(took), stat.Ms(stat.Percentile(took, 99)), stat.Ms(stat.Percentile(e2e, 99)))
		}
		rows = append(rows, []string{r.name,
			fmt.Sprintf("%.0f%%", 100*ratio(hf.okPerSec, hh.okPerSec)),
			fmt.Sprintf("%s → %s (%.2f×)", stat.Ms(hh.p99), stat.Ms(hf.p99), ratio(float64(hf.p99), float64(hh.p99))),
			open, fb, strconv.FormatInt(r.hits[1], 10), msOrNever(recovery(r)), fmt.Sprintf("%.1f", fr.okPerSec)})
	}
	stat.Table(os.Stdout, []string{"library", "healthy endpoint during fault: good answers/s vs healthy phase",
		"healthy endpoint p99 ms, healthy phase → fault", "faulty: first short-circuit, ms into the fault",
		"faulty: fallbacks after first open: n: p99 ms in front / end to end",
		"calls reaching /faulty during fault", "recovery ms after the fault", "faulty good answers/s when recovered"}, rows)
	fmt.Println()
}

// The preset's targets (issue 27): recovery within maxRecovery, no more calls reaching /faulty
// during the fault than the best peer, and the healthy endpoint's p99 during the fault within
// maxP99Ratio of its p99 in the healthy phase.
const (
	maxRecovery = 500 * time.Millisecond
	maxP99Ratio = 1.2
)

// judgment is one round's figures for the preset's targets.
type judgment struct {
	recovery time.Duration // -1: never recovered
	calls    int64         // calls reaching /faulty during the fault
	best     int64         // the best peer's calls
	bestName string
	p99      float64 // healthy endpoint's p99, fault over healthy phase
}

func (j judgment) recovered() bool { return j.recovery >= 0 && j.recovery <= maxRecovery }
func (j judgment) fewCalls() bool  { return j.calls <= j.best }
func (j judgment) p99Held() bool   { return j.p99 <= maxP99Ratio }

// judge returns the preset's figures in results, or false when the preset or both peers are
// missing.
func judge(results []result, cfg config) (judgment, bool) {
	var preset *result
	j := judgment{best: -1}
	for i, r := range results {
		switch {
		case r.name == presetName:
			preset = &results[i]
		case r.name == "hystrix-go" || r.name == "failsafe-go":
			if j.best < 0 || r.hits[1] < j.best {
				j.best, j.bestName = r.hits[1], r.name
			}
		}
	}
	if preset == nil || j.best < 0 {
		return j, false
	}
	hh, hf := summarize(*preset, 0, epHealthy, cfg), summarize(*preset, 1, epHealthy, cfg)
	j.recovery, j.calls, j.p99 = recovery(*preset), preset.hits[1], ratio(float64(hf.p99), float64(hh.p99))
	return j, true
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// targetsOverRounds prints the preset's targets judged on the medians of the rounds (the best
// peer's calls: the median of each round's best), with every round's figures and how many rounds
// met each target on their own; one round is its own median. A recovery that never came counts
// as the longest.
func targetsOverRounds(rounds [][]result, cfg config) {
	var js []judgment
	for _, results := range rounds {
		if j, ok := judge(results, cfg); ok {
			js = append(js, j)
		}
	}
	if len(js) == 0 {
		return
	}
	never := time.Duration(math.MaxInt64)
	var rec []time.Duration
	var calls, best []int64
	var p99 []float64
	var recMet, callsMet, p99Met int
	var recs, callss, p99s []string
	for _, j := range js {
		r := j.recovery
		if r < 0 {
			r = never
		}
		rec, calls, best, p99 = append(rec, r), append(calls, j.calls), append(best, j.best), append(p99, j.p99)
		recs, callss, p99s = append(recs, msOrNever(j.recovery)),
			append(callss, fmt.Sprintf("%d/%d (%s)", j.calls, j.best, j.bestName)), append(p99s, fmt.Sprintf("%.2f", j.p99))
		recMet, callsMet, p99Met = recMet+b2i(j.recovered()), callsMet+b2i(j.fewCalls()), p99Met+b2i(j.p99Held())
	}
	m := judgment{recovery: median(rec), calls: median(calls), best: median(best), p99: median(p99)}
	if m.recovery == never {
		m.recovery = -1
	}
	n := len(js)
	fmt.Printf("#### Targets of %s over %d rounds (median: the lower of two middles)\n\n", presetName, n)
	stat.Table(os.Stdout, []string{"target", "median", "each round", "rounds met", "verdict on the median"}, [][]string{
		{fmt.Sprintf("recovery ≤ %s ms", stat.Ms(maxRecovery)), msOrNever(m.recovery), strings.Join(recs, ", "),
			fmt.Sprintf("%d/%d", recMet, n), met(m.recovered())},
		{"calls reaching /faulty during the fault ≤ best peer's (preset/best peer)", fmt.Sprintf("%d/%d", m.calls, m.best),
			strings.Join(callss, ", "), fmt.Sprintf("%d/%d", callsMet, n), met(m.fewCalls())},
		{fmt.Sprintf("healthy endpoint p99 during the fault ≤ %.1f× healthy phase", maxP99Ratio), fmt.Sprintf("%.2f×", m.p99),
			strings.Join(p99s, ", "), fmt.Sprintf("%d/%d", p99Met, n), met(m.p99Held())},
	})
	fmt.Println()
}

// median returns the lower middle of xs (sorted in place); xs is not empty.
func median[T cmp.Ordered](xs []T) T {
	slices.Sort(xs)
	return xs[(len(xs)-1)/2]
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// msOrNever formats d in milliseconds, or "never" when negative.
func msOrNever(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return stat.Ms(d)
}

// reasons formats the counts of why calls did not get the backend's answer.
func reasons(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d/%d/%d", m[reasonShortCircuit], m[reasonRejected], m[reasonTimeout], m[reasonError])
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
