package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// rounds writes n benchmark lines for group/name, the i-th at ns·(1 + i/100), with the given
// B/op and allocs/op.
func rounds(group, name string, n int, ns float64, bytes, allocs int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "Benchmark%s/%s-2 \t 1000\t %.1f ns/op\t %d B/op\t %d allocs/op\n",
			group, name, ns*(1+float64(i)/100), bytes, allocs)
	}
	return b.String()
}

func mustParse(t *testing.T, in string) *results {
	t.Helper()
	r, err := parse(strings.NewReader("goos: linux\n" + in + "PASS\n"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// targetNamed returns the serial target whose what starts with prefix.
func targetNamed(t *testing.T, prefix string) target {
	t.Helper()
	for _, tg := range targets("") {
		if strings.HasPrefix(tg.what, prefix) {
			return tg
		}
	}
	t.Fatalf("no target %q", prefix)
	return target{}
}

func TestParse(t *testing.T) {
	r := mustParse(t, rounds("Command", "bulwark-semaphore", 3, 100, 0, 0)+rounds("Command", "hystrix-go", 1, 6000, 1377, 24))
	s := r.get("Command", "bulwark-semaphore")
	if s == nil || len(s.ns) != 3 || s.medianNs() != 101 {
		t.Fatalf("bulwark-semaphore: %+v", s)
	}
	if h := r.get("Command", "hystrix-go"); h == nil || h.medianAllocs() != 24 || h.medianBytes() != 1377 {
		t.Fatalf("hystrix-go: %+v", h)
	}
}

// The rounds run the cases in a shuffled order; the tables list them by name.
func TestInGroupSortsByName(t *testing.T) {
	r := mustParse(t, rounds("Command", "hystrix-go", 1, 1, 0, 0)+rounds("Command", "bulwark-pool", 1, 1, 0, 0)+
		rounds("Breaker", "bulwark", 1, 1, 0, 0)+rounds("Command", "failsafe-go", 1, 1, 0, 0))
	var names []string
	for _, s := range r.inGroup("Command") {
		names = append(names, s.name)
	}
	if got := strings.Join(names, " "); got != "bulwark-pool failsafe-go hystrix-go" {
		t.Errorf("Command cases in order %q", got)
	}
}

// A like-for-like target with 8 rounds on each side: the ratio of medians, its range from both
// medians' confidence intervals, the U test, and the verdict.
func TestEvaluateRatio(t *testing.T) {
	r := mustParse(t, rounds("Command", "bulwark-semaphore", 8, 100, 0, 0)+rounds("Command", "failsafe-go", 8, 900, 448, 16))
	// benchstat (go tool benchstat, the same pinned version) prints these 8 rounds of 100-107 ns
	// as "103.5n ± 3%".
	if got := nsOf(r.get("Command", "bulwark-semaphore"), wall); got != "104 ± 3%" {
		t.Errorf("nsOf = %q, want benchstat's 104 ± 3%%", got)
	}
	got := evaluate(r, targetNamed(t, "semaphore command ≥ 5×"), wall)
	// medians 931.5 / 103.5 = 9.00×
	for _, want := range []string{"9.00× [", "(932 / 104 ns, p=0.000 n=8): **met**"} {
		if !strings.Contains(got, want) {
			t.Errorf("evaluate = %q, lacks %q", got, want)
		}
	}
	// The range holds the ratio and lies within the extremes: 900/107 to 963/100.
	m := regexp.MustCompile(`\[([\d.]+)–([\d.]+)\]`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("no range in %q", got)
	}
	lo, _ := strconv.ParseFloat(m[1], 64)
	hi, _ := strconv.ParseFloat(m[2], 64)
	if !(900.0/107 <= lo && lo < 9 && 9 < hi && hi <= 963.0/100) {
		t.Errorf("range [%v, %v] of a 9.00× ratio, extremes 8.41 and 9.63", lo, hi)
	}
	if strings.Contains(got, "noise") || strings.Contains(got, "few rounds") {
		t.Errorf("a clear verdict is marked unsure: %q", got)
	}
}

func TestEvaluateWithinNoise(t *testing.T) {
	// bulwark's breaker 1.00–1.07× gobreaker's: the median meets "at most 1×"... or not, but the
	// range straddles 1 either way.
	r := mustParse(t, rounds("Breaker", "bulwark", 8, 101, 0, 0)+rounds("Breaker", "gobreaker-v2", 8, 100, 0, 0))
	got := evaluate(r, targetNamed(t, "breaker alone"), wall)
	if !strings.Contains(got, "**missed** (within noise)") {
		t.Errorf("evaluate = %q, want a miss within noise", got)
	}
}

func TestEvaluateTooFewRounds(t *testing.T) {
	r := mustParse(t, rounds("Command", "bulwark-pool", 1, 1000, 0, 0)+rounds("Command", "hystrix-go", 1, 20000, 0, 0))
	got := evaluate(r, targetNamed(t, "pool command with timeout ≥ 10×"), wall)
	if !strings.Contains(got, "20.0× (20000 / 1000 ns") || !strings.Contains(got, "**met** (too few rounds for a range)") {
		t.Errorf("evaluate = %q", got)
	}
}

func TestEvaluateAllocsAndOffset(t *testing.T) {
	r := mustParse(t, rounds("Command", "bulwark-semaphore", 8, 200, 0, 0)+rounds("Baseline", "time-since-mono", 8, 60, 0, 0))
	if got := evaluate(r, targetNamed(t, "semaphore command: 0 allocs"), wall); got != "0 allocs: **met**" {
		t.Errorf("allocs: %q", got)
	}
	if got := evaluate(r, targetNamed(t, "semaphore command ≤ the two monotonic"), wall); !strings.Contains(got, "= 142 ns: **missed**") {
		t.Errorf("offset: %q", got)
	}
	if got := evaluate(r, targetNamed(t, "pool command without timeout"), wall); got != "n/a (not run)" {
		t.Errorf("target without its cases: %q", got)
	}
}

// What each command case does, said here independently of the targets: whether the function runs
// on another goroutine and whether a timer is armed per call. A like-for-like target must pair
// cases that agree on both; a target that pairs cases that differ must not be filed as like.
var work = map[string]struct{ handoff, timer bool }{
	"Command/bulwark-semaphore":         {false, false},
	"Command/bulwark-semaphore-timeout": {false, true},
	"Command/bulwark-pool":              {true, true},
	"Command/bulwark-pool-notimeout":    {true, false},
	"Command/hystrix-go":                {true, true},
	"Command/failsafe-go":               {false, false},
	"Command/failsafe-go-timeout":       {false, true},
	"Baseline/" + rawAnts:               {true, false},
	"Breaker/bulwark":                   {false, false},
	"Breaker/gobreaker-v2":              {false, false},
}

func TestTargetsPairLikeWithLike(t *testing.T) {
	for _, tg := range targets("") {
		if tg.allocsOf != "" || tg.offsetNs != 0 {
			continue
		}
		n, nok := work[tg.numGroup+"/"+tg.numCase]
		d, dok := work[tg.denGroup+"/"+tg.denCase]
		if !nok || !dok {
			t.Errorf("%s: %s/%s or %s/%s missing from the test's table", tg.what, tg.numGroup, tg.numCase, tg.denGroup, tg.denCase)
			continue
		}
		if same := n == d; same != (tg.kind == like) && tg.kind != own {
			t.Errorf("%s: %s %+v vs %s %+v filed as kind %d", tg.what, tg.numCase, n, tg.denCase, d, tg.kind)
		}
		if tg.kind == like && (!strings.Contains(tg.pair, tg.numCase) || !strings.Contains(tg.pair, tg.denCase)) {
			t.Errorf("%s: the pair %q does not name both cases", tg.what, tg.pair)
		}
		if (n.handoff || d.handoff) && tg.denGroup == "Baseline" && tg.denCase != rawAnts {
			t.Errorf("%s: a pool ratio against %s, not the raw ants baseline", tg.what, tg.denCase)
		}
	}
}

// The serial and parallel lists must stay parallel: writeTargets pairs them by index.
func TestTargetsSerialParallelMatch(t *testing.T) {
	s, p := targets(""), targets("Parallel")
	if len(s) != len(p) {
		t.Fatalf("%d serial targets, %d parallel", len(s), len(p))
	}
	for i := range s {
		a, b := s[i], p[i]
		ok := a.what == b.what && b.numGroup == a.numGroup+"Parallel" && b.denGroup == a.denGroup+"Parallel"
		if a.allocsOf != "" {
			ok = a.what == b.what && b.allocsIn == a.allocsIn+"Parallel"
		}
		if !ok {
			t.Errorf("target %d: serial %+v, parallel %+v", i, a, b)
		}
	}
}

// The unequal comparison is printed, but in its own table, after the like-for-like one.
func TestWriteTargetsKeepsUnequalOutOfTheHeadline(t *testing.T) {
	r := mustParse(t, rounds("Command", "bulwark-semaphore", 8, 200, 0, 0)+rounds("Command", "hystrix-go", 8, 9000, 0, 0))
	var b strings.Builder
	writeTargets(&b, r)
	out := b.String()
	likeAt, unequalAt := strings.Index(out, "#### Like for like"), strings.Index(out, "#### Not like for like")
	hystrixAt := strings.Index(out, "| semaphore command ≥ 50× faster than hystrix-go Do |")
	if likeAt < 0 || unequalAt < likeAt || hystrixAt < unequalAt {
		t.Errorf("like table at %d, unequal at %d, semaphore vs hystrix-go at %d:\n%s", likeAt, unequalAt, hystrixAt, out)
	}
}

func TestMissing(t *testing.T) {
	r := mustParse(t, rounds("Command", "bulwark-semaphore", 1, 100, 0, 0))
	got := missing(r)
	if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), "Command/failsafe-go") {
		t.Errorf("missing = %q", got)
	}
}

func TestMedianEven(t *testing.T) {
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median = %v", m)
	}
}

func TestWriteSVG(t *testing.T) {
	r := mustParse(t, rounds("Command", "bulwark-semaphore", 3, 100, 0, 0)+rounds("Command", "hystrix-go", 3, 6000, 1377, 24))
	var b strings.Builder
	writeSVG(&b, r, sections, "a <subtitle>")
	out := b.String()
	for _, want := range []string{"<svg", "bulwark-semaphore", "a &lt;subtitle&gt;", "10 µs", "</svg>"} {
		if !strings.Contains(out, want) {
			t.Errorf("svg lacks %q", want)
		}
	}
}

// The CPU-time column reads cpu-ns/op, not ns/op; output without it says so.
func TestEvaluateCPU(t *testing.T) {
	line := func(name string, ns, cpu float64) string {
		return fmt.Sprintf("BenchmarkCommand/%s-2 \t 1000\t %.1f ns/op\t %.1f cpu-ns/op\t 0 B/op\t 0 allocs/op\n", name, ns, cpu)
	}
	var in string
	for i := range 6 {
		in += line("bulwark-semaphore", 600+float64(i), 150+float64(i)) + line("failsafe-go", 2400+float64(i), 1500+float64(i))
	}
	r := mustParse(t, in)
	tg := targetNamed(t, "semaphore command ≥ 5×")
	// medians 2402.5 / 602.5 (wall) and 1502.5 / 152.5 (CPU)
	if got := evaluate(r, tg, wall); !strings.Contains(got, "3.99× [") || !strings.Contains(got, "**missed**") {
		t.Errorf("wall: %q", got)
	}
	if got := evaluate(r, tg, cpu); !strings.Contains(got, "9.85× [") || !strings.Contains(got, "(1502 / 152 ns") || !strings.Contains(got, "**met**") {
		t.Errorf("cpu: %q", got)
	}
	old := mustParse(t, rounds("Command", "bulwark-semaphore", 6, 100, 0, 0)+rounds("Command", "failsafe-go", 6, 900, 0, 0))
	if got := evaluate(old, tg, cpu); got != "n/a (not reported)" {
		t.Errorf("cpu without cpu-ns/op: %q", got)
	}
}
