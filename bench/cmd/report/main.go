// Command report turns `go test -bench` output of the overhead benchmarks into markdown tables
// (medians over -count runs, ratios, the performance targets) on stdout and an SVG bar chart.
//
//	go run ./cmd/report -in bench.txt -svg overhead.svg > overhead.md
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

var sections = []section{
	{title: "Command: bulkhead + breaker + timeout", serial: "Command", parallel: "CommandParallel", highlightPrefix: "bulwark"},
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
		ref := r.get(sec.serial, references[sec.serial])
		refPar := r.get(sec.parallel, references[sec.serial])
		fmt.Fprintf(w, "#### %s\n\n", sec.title)
		fmt.Fprintf(w, "| case | serial ns/op (median) | serial min–max | parallel ns/op (median) | B/op | allocs/op (serial / parallel) | serial × %s | parallel × %s |\n",
			references[sec.serial], references[sec.serial])
		fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
		for _, s := range cases {
			p := r.get(sec.parallel, s.name)
			allocs := fmt.Sprintf("%.0f", s.medianAllocs())
			if p != nil {
				allocs += fmt.Sprintf(" / %.0f", p.medianAllocs())
			}
			fmt.Fprintf(w, "| %s | %s | %s–%s | %s | %.0f | %s | %s | %s |\n", s.name,
				num(s.medianNs()), num(minOf(s.ns)), num(maxOf(s.ns)), nsOf(p),
				s.medianBytes(), allocs, ratioCell(s, ref), ratioCell(p, refPar))
		}
		fmt.Fprintln(w)
	}
}

// target is one performance goal: a ratio num/den that must reach at least want (or, with atMost,
// stay at most want).
type target struct {
	what               string
	numGroup, numCase  string
	denGroup, denCase  string
	want               float64
	atMost             bool
	offsetNs           float64 // added to the denominator's ns (for "clock + 80 ns")
	allocsOf, allocsIn string  // instead of a ratio: allocs/op of this case must be 0
}

func targets(mode string) []target {
	cmd, brk, base := "Command"+mode, "Breaker"+mode, "Baseline"+mode
	return []target{
		{what: "semaphore command ≥ 10× faster than failsafe-go composed", numGroup: cmd, numCase: "failsafe-go", denGroup: cmd, denCase: "bulwark-semaphore", want: 10},
		{what: "semaphore command ≥ 50× faster than hystrix-go Do", numGroup: cmd, numCase: "hystrix-go", denGroup: cmd, denCase: "bulwark-semaphore", want: 50},
		{what: "(same work: both arm a timer) semaphore command with timeout ≥ 10× faster than failsafe-go composed", numGroup: cmd, numCase: "failsafe-go", denGroup: cmd, denCase: "bulwark-semaphore-timeout", want: 10},
		{what: "semaphore command: 0 allocs/op", allocsIn: cmd, allocsOf: "bulwark-semaphore"},
		{what: "pool command ≥ 10× faster than hystrix-go Do", numGroup: cmd, numCase: "hystrix-go", denGroup: cmd, denCase: "bulwark-pool", want: 10},
		{what: "breaker at least as fast as gobreaker v2 Execute (rolling window)", numGroup: brk, numCase: "gobreaker-v2", denGroup: brk, denCase: "bulwark", want: 1},
		{what: "breaker at least as fast as gobreaker v2 Execute (no window)", numGroup: brk, numCase: "gobreaker-v2-nowindow", denGroup: brk, denCase: "bulwark", want: 1},
		{what: "design aim: pool command within 1.3× of a raw ants handoff", numGroup: cmd, numCase: "bulwark-pool", denGroup: base, denCase: "ants-submit-wait", want: 1.3, atMost: true},
		{what: "design aim, like for like (no timer): pool command without timeout within 1.3× of a raw ants handoff", numGroup: cmd, numCase: "bulwark-pool-notimeout", denGroup: base, denCase: "ants-submit-wait", want: 1.3, atMost: true},
		{what: "design aim: semaphore command ≤ time.Now+time.Since + 80 ns", numGroup: cmd, numCase: "bulwark-semaphore", denGroup: base, denCase: "time-now-since", want: 1, atMost: true, offsetNs: 80},
	}
}

func writeTargets(w io.Writer, r *results) {
	fmt.Fprintln(w, "#### Targets (same-run medians)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| target | serial | parallel |")
	fmt.Fprintln(w, "| --- | --- | --- |")
	for i, t := range targets("") {
		tp := targets("Parallel")[i]
		fmt.Fprintf(w, "| %s | %s | %s |\n", t.what, evaluate(r, t), evaluate(r, tp))
	}
	fmt.Fprintln(w)
}

func evaluate(r *results, t target) string {
	if t.allocsOf != "" {
		s := r.get(t.allocsIn, t.allocsOf)
		if s == nil {
			return "n/a (not run)"
		}
		a := s.medianAllocs()
		return fmt.Sprintf("%.0f allocs: %s", a, verdict(a == 0))
	}
	n, d := r.get(t.numGroup, t.numCase), r.get(t.denGroup, t.denCase)
	if n == nil || d == nil {
		return "n/a (not run)"
	}
	nv, dv := n.medianNs(), d.medianNs()
	if t.offsetNs != 0 {
		limit := dv + t.offsetNs
		return fmt.Sprintf("%s ns vs %s ns + %.0f = %s ns: %s", num(nv), num(dv), t.offsetNs, num(limit), verdict(nv <= limit))
	}
	ratio := nv / dv
	if t.atMost {
		return fmt.Sprintf("%.2f× (%s / %s ns): %s", ratio, num(nv), num(dv), verdict(ratio <= t.want))
	}
	return fmt.Sprintf("%.1f× (%s / %s ns): %s", ratio, num(nv), num(dv), verdict(ratio >= t.want))
}

func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**missed**"
}

func ratioCell(s, ref *sample) string {
	if s == nil || ref == nil || ref.medianNs() == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", s.medianNs()/ref.medianNs())
}

func nsOf(s *sample) string {
	if s == nil {
		return "-"
	}
	return num(s.medianNs())
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

func minOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		m = min(m, x)
	}
	return m
}

func maxOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
