// Command report turns the overhead benchmarks' output (bench/run.sh: every case in a process of
// its own, in rounds) into markdown tables on stdout and an SVG bar chart: per case the median of
// the rounds with benchstat's 95% confidence interval, then the targets as ratios of two cases of
// the same run, like-for-like pairs first, with the ratio's range and benchstat's p-value.
//
//	go run ./cmd/report -in bench.txt -svg overhead.svg > overhead.md
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"golang.org/x/perf/benchmath"
)

var sections = []section{
	{title: "Command: bulkhead + breaker, with and without a timeout", serial: "Command", parallel: "CommandParallel", highlightPrefix: "bulwark"},
	{title: "Breaker only", serial: "Breaker", parallel: "BreakerParallel", highlightPrefix: "bulwark"},
	{title: "Baselines", serial: "Baseline", parallel: "BaselineParallel", highlightPrefix: "bulwark"},
}

// references: the case each section's ratios are taken against.
var references = map[string]string{"Command": "bulwark-semaphore", "Breaker": "bulwark", "Baseline": "direct"}

func main() {
	in := flag.String("in", "", "benchmark output (default stdin)")
	svg := flag.String("svg", "", "write the chart here")
	subtitle := flag.String("subtitle", "", "second line of the chart")
	flag.Parse()

	var src io.Reader = os.Stdin
	if *in != "" {
		f, err := os.Open(*in)
		if err != nil {
			fail(err)
		}
		defer f.Close()
		src = f
	}
	r, err := parse(src)
	if err != nil {
		fail(err)
	}
	if len(r.order) == 0 {
		fail(fmt.Errorf("no benchmark lines in the input"))
	}
	if m := missing(r); len(m) > 0 {
		fail(fmt.Errorf("cases the targets compare are not in the input (renamed?): %s", strings.Join(m, ", ")))
	}
	writeTables(os.Stdout, r)
	writeTargets(os.Stdout, r)
	if *svg != "" {
		f, err := os.Create(*svg)
		if err != nil {
			fail(err)
		}
		writeSVG(f, r, sections, *subtitle)
		if err := f.Close(); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "report:", err)
	os.Exit(1)
}

func writeTables(w io.Writer, r *results) {
	for _, sec := range sections {
		cases := r.inGroup(sec.serial)
		if len(cases) == 0 {
			continue
		}
		refName := references[sec.serial]
		ref, refPar := r.get(sec.serial, refName), r.get(sec.parallel, refName)
		fmt.Fprintf(w, "#### %s\n\n", sec.title)
		fmt.Fprintf(w, "| case | serial ns/op (median ± 95%% CI) | serial CPU ns/op | parallel ns/op | B/op | allocs/op (serial / parallel) | rounds | serial × %s | parallel × %s |\n",
			refName, refName)
		fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
		for _, s := range cases {
			p := r.get(sec.parallel, s.name)
			allocs := fmt.Sprintf("%.0f", s.medianAllocs())
			if p != nil {
				allocs += fmt.Sprintf(" / %.0f", p.medianAllocs())
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %.0f | %s | %d | %s | %s |\n", s.name,
				nsOf(s, wall), nsOf(s, cpu), nsOf(p, wall), s.medianBytes(), allocs, len(s.ns), ratioCell(s, ref), ratioCell(p, refPar))
		}
		fmt.Fprintln(w)
	}
}

// rawAnts is the one raw pool baseline (bench's Baseline/ants-submit-wait: Submit a closure that
// returns a result, wait for it): every pool ratio is taken against it.
const rawAnts = "ants-submit-wait"

// kind sorts the targets into the report's three tables.
type kind int

const (
	like    kind = iota // both sides do the same work: the headlines
	unequal             // the sides do different work: printed, never a headline
	own                 // bulwark against itself or a raw floor
)

// target is one comparison of two cases of the same run, num/den, that must reach at least want
// (or, with atMost, stay at most want). pair says what both sides do (like) or what differs
// (unequal). A target with allocsOf instead checks that the case allocates nothing; one with
// offsetNs compares num with den's ns plus that offset.
type target struct {
	what, pair         string
	kind               kind
	numGroup, numCase  string
	denGroup, denCase  string
	want               float64
	atMost             bool
	offsetNs           float64
	allocsOf, allocsIn string
}

// targets lists the comparisons for one mode ("" serial, "Parallel"). No case has a fallback.
func targets(mode string) []target {
	cmd, brk, base := "Command"+mode, "Breaker"+mode, "Baseline"+mode
	return []target{
		{what: "semaphore command ≥ 5× faster than failsafe-go breaker + bulkhead", kind: like,
			pair:     "caller's goroutine, no timer: bulwark-semaphore vs failsafe-go",
			numGroup: cmd, numCase: "failsafe-go", denGroup: cmd, denCase: "bulwark-semaphore", want: 5},
		{what: "semaphore command with timeout ≥ 3× faster than failsafe-go breaker + bulkhead + timeout", kind: like,
			pair:     "caller's goroutine, a timer armed per call: bulwark-semaphore-timeout vs failsafe-go-timeout",
			numGroup: cmd, numCase: "failsafe-go-timeout", denGroup: cmd, denCase: "bulwark-semaphore-timeout", want: 3},
		{what: "pool command with timeout ≥ 10× faster than hystrix-go Do", kind: like,
			pair:     "a worker goroutine, a timer armed per call: bulwark-pool vs hystrix-go",
			numGroup: cmd, numCase: "hystrix-go", denGroup: cmd, denCase: "bulwark-pool", want: 10},
		{what: "breaker alone at most gobreaker v2's time (rolling window)", kind: like,
			pair:     "breaker only, 10 s rolling window, no clock read per call: bulwark vs gobreaker-v2",
			numGroup: brk, numCase: "bulwark", denGroup: brk, denCase: "gobreaker-v2", want: 1, atMost: true},
		{what: "pool command without timeout within 1.3× of the raw ants handoff", kind: like,
			pair:     "a worker goroutine, no timer: bulwark-pool-notimeout vs " + rawAnts,
			numGroup: cmd, numCase: "bulwark-pool-notimeout", denGroup: base, denCase: rawAnts, want: 1.3, atMost: true},
		{what: "semaphore command ≥ 50× faster than hystrix-go Do", kind: unequal,
			pair:     "hystrix-go hands every call to a goroutine and arms a timer; bulwark-semaphore does neither",
			numGroup: cmd, numCase: "hystrix-go", denGroup: cmd, denCase: "bulwark-semaphore", want: 50},
		{what: "pool command with timeout within 1.5× of the raw ants handoff", kind: unequal,
			pair:     "bulwark-pool arms a timer per call, " + rawAnts + " does not",
			numGroup: cmd, numCase: "bulwark-pool", denGroup: base, denCase: rawAnts, want: 1.5, atMost: true},
		{what: "semaphore command with timeout within 2× of the same command without", kind: own,
			pair:     "the timer alone: bulwark-semaphore-timeout vs bulwark-semaphore",
			numGroup: cmd, numCase: "bulwark-semaphore-timeout", denGroup: cmd, denCase: "bulwark-semaphore", want: 2, atMost: true},
		{what: "semaphore command ≤ the two monotonic clock reads it makes + 80 ns", kind: own,
			pair:     "bulwark-semaphore vs time-since-mono + 80 ns",
			numGroup: cmd, numCase: "bulwark-semaphore", denGroup: base, denCase: "time-since-mono", want: 1, atMost: true, offsetNs: 80},
		{what: "semaphore command: 0 allocs/op", kind: own, pair: "bulwark-semaphore", allocsIn: cmd, allocsOf: "bulwark-semaphore"},
	}
}

// writeTargets prints the like-for-like pairs first, then the comparisons whose sides do not do
// the same work (never a headline), then bulwark's own aims.
func writeTargets(w io.Writer, r *results) {
	serial, parallel := targets(""), targets("Parallel")
	parts := []struct {
		title, pairHead string
		kind            kind
	}{
		{"Like for like: peers and baselines doing the same work", "pair: what both sides do", like},
		{"Not like for like (targets of issue 24, kept for the record; never headlines)", "what differs", unequal},
		{"bulwark's own aims", "cases", own},
	}
	for _, part := range parts {
		fmt.Fprintf(w, "#### %s\n\n", part.title)
		fmt.Fprintf(w, "| target | %s | serial, wall time | serial, CPU time | parallel, wall time |\n", part.pairHead)
		fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
		for i, t := range serial {
			if t.kind == part.kind {
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", t.what, t.pair,
					evaluate(r, t, wall), evaluate(r, t, cpu), evaluate(r, parallel[i], wall))
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "A ratio is of the two medians; the range in brackets combines both medians' 95% confidence")
	fmt.Fprintln(w, "intervals (benchstat's, distribution-free): low numerator over high denominator to high over")
	fmt.Fprintln(w, "low. p is benchstat's Mann-Whitney U test of the two samples. \"within noise\" marks a verdict")
	fmt.Fprintln(w, "whose range straddles the target: more rounds or a quieter machine could turn it. Wall time")
	fmt.Fprintln(w, "is ns/op, what a caller waits; CPU time is the process's user + system time per call over all")
	fmt.Fprintln(w, "its threads (cpu-ns/op), which leaves out the time other processes held the cores.")
	fmt.Fprintln(w)
}

// missing lists the cases some target needs that the input lacks, as group/case.
func missing(r *results) []string {
	var out []string
	for _, t := range append(targets(""), targets("Parallel")...) {
		for _, c := range [][2]string{{t.numGroup, t.numCase}, {t.denGroup, t.denCase}, {t.allocsIn, t.allocsOf}} {
			if c[0] != "" && r.get(c[0], c[1]) == nil && !slices.Contains(out, c[0]+"/"+c[1]) {
				out = append(out, c[0]+"/"+c[1])
			}
		}
	}
	return out
}

// evaluate prints target t on metric m: the figure and the verdict.
func evaluate(r *results, t target, m metric) string {
	if t.allocsOf != "" {
		s := r.get(t.allocsIn, t.allocsOf)
		if s == nil {
			return "n/a (not run)"
		}
		a := s.medianAllocs()
		return fmt.Sprintf("%.0f allocs: %s", a, verdict(a == 0, clear))
	}
	n, d := r.get(t.numGroup, t.numCase), r.get(t.denGroup, t.denCase)
	if n == nil || d == nil {
		return "n/a (not run)"
	}
	if len(n.values(m)) == 0 || len(d.values(m)) == 0 {
		return "n/a (not reported)"
	}
	ns, ds := n.summary(m), d.summary(m)
	if t.offsetNs != 0 {
		limit := ds.Center + t.offsetNs
		return fmt.Sprintf("%s ns vs %s ns + %.0f = %s ns: %s", num(ns.Center), num(ds.Center), t.offsetNs, num(limit),
			verdict(ns.Center <= limit, spread(ns.Lo, ns.Hi, ds.Lo+t.offsetNs, ds.Hi+t.offsetNs)))
	}
	ratio, lo, hi := ns.Center/ds.Center, ns.Lo/ds.Hi, ns.Hi/ds.Lo
	met := ratio >= t.want
	if t.atMost {
		met = ratio <= t.want
	}
	p := benchmath.AssumeNothing.Compare(n.stat(m), d.stat(m))
	return fmt.Sprintf("%s× %s(%s / %s ns, %s): %s", ratioNum(ratio), rangeOf(lo, hi), num(ns.Center), num(ds.Center), p,
		verdict(met, spread(lo, hi, t.want, t.want)))
}

// confidence says how sure a verdict is: the range of the measured side clears the target's
// range, straddles it, or is unknown (fewer rounds than a 95% interval needs).
type confidence int

const (
	clear confidence = iota
	withinNoise
	noRange
)

// spread compares the measured range [lo, hi] with the target's [tlo, thi].
func spread(lo, hi, tlo, thi float64) confidence {
	switch {
	case !finite(lo) || !finite(hi) || lo <= 0:
		return noRange
	case lo <= thi && tlo <= hi:
		return withinNoise
	}
	return clear
}

func finite(v float64) bool { return !math.IsInf(v, 0) && !math.IsNaN(v) }

// ratioNum prints a ratio: two decimals below 10, one above.
func ratioNum(v float64) string {
	if v >= 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// rangeOf prints a ratio's confidence range and a space, or nothing when there is none.
func rangeOf(lo, hi float64) string {
	if spread(lo, hi, 0, 0) == noRange {
		return ""
	}
	return fmt.Sprintf("[%s–%s] ", ratioNum(lo), ratioNum(hi))
}

func verdict(ok bool, c confidence) string {
	v := "**missed**"
	if ok {
		v = "**met**"
	}
	switch c {
	case withinNoise:
		v += " (within noise)"
	case noRange:
		v += " (too few rounds for a range)"
	}
	return v
}

func ratioCell(s, ref *sample) string {
	if s == nil || ref == nil || ref.medianNs() == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", s.medianNs()/ref.medianNs())
}

// nsOf prints a case's median of m with benchstat's confidence interval, as benchstat does.
func nsOf(s *sample, m metric) string {
	if s == nil || len(s.values(m)) == 0 {
		return "-"
	}
	sum := s.summary(m)
	return num(sum.Center) + " ± " + sum.PctRangeString()
}

// num prints ns/op with precision fitting its size.
func num(v float64) string {
	switch {
	case v >= 100:
		return strings.TrimSuffix(fmt.Sprintf("%.0f", v), ".")
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
