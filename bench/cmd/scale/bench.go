package main

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The rows of issue 24's table that the library's own benchmarks measure (go test -bench in
// command/, metrics/, dashboard/ and prom/). benchRows builds each package's test binary once
// and runs each row's job once per round, the rows in turns; a job runs all of its row's cases
// in one process, so that the two cases of a ratio (a path and its baseline) ran at one moment.
// A row's figure is the median over the rounds (of the ratio within each round, where it is a
// ratio).

// job is one run of a test binary: the benchmarks that match pattern, for benchtime each.
type job struct {
	pkg       string // the package's directory, from the repository's root
	pattern   string // -test.bench
	benchtime string // -test.benchtime
}

// results are one run's figures: benchmark name (without the -GOMAXPROCS suffix) → unit → value.
type results map[string]map[string]float64

// row is one printed row: what it measures, the job that runs its cases, and its figure and
// verdict from the rounds' results of that job.
type row struct {
	what   string
	job    job
	figure func(rounds []results) (figure, verdict string)
}

// benchRows prints the rows, each job run rounds times; quick takes the 1,000-command cases
// where a benchmark has them, and short runs of the per-call cases.
func benchRows(rounds int, quick bool) {
	root, err := repoRoot()
	check(err)
	tmp, err := os.MkdirTemp("", "scale")
	check(err)
	defer os.RemoveAll(tmp)
	rows := issueRows(quick)
	bins := map[string]string{}
	for _, r := range rows {
		if _, ok := bins[r.job.pkg]; !ok {
			bins[r.job.pkg] = buildTest(root, tmp, r.job.pkg)
		}
	}
	got := make([][]results, len(rows)) // row → round → results of its job
	for range rounds {
		for i, r := range rows {
			out, err := runTest(bins[r.job.pkg], filepath.Join(root, r.job.pkg), r.job)
			check(err)
			got[i] = append(got[i], out)
		}
	}
	for i, r := range rows {
		figure, verdict := r.figure(got[i])
		fmt.Printf("| %s | %s | %s |\n", r.what, figure, verdict)
	}
}

// issueRows returns the rows, in the order of issue 24's table.
func issueRows(quick bool) []row {
	snap, scrape, perCall := "10000", "10000", "1s"
	if quick {
		snap, scrape, perCall = "1000", "1000", "200ms"
	}
	execute := func(pattern string) job { return job{"command", pattern, perCall} }
	return []row{
		{
			what: "registry snapshot, " + snap + " commands, every bucket live, CPU (static / changed)",
			job:  job{"command", "^BenchmarkRegistrySnapshot$/^commands=" + snap + "$", "10x"},
			figure: func(rs []results) (string, string) {
				static := middle(values(rs, "BenchmarkRegistrySnapshot/commands="+snap+"/static", "cpu-ms/op"))
				changed := middle(values(rs, "BenchmarkRegistrySnapshot/commands="+snap+"/changed", "cpu-ms/op"))
				return fmt.Sprintf("%.1f / %.1f ms", static, changed), sized(quick, "10,000 commands", changed <= 10, "≤ 10 ms")
			},
		},
		{
			what: "stream tick (snapshot + encode), 5,000 commands, CPU",
			job:  job{"dashboard", "^BenchmarkTick$", "5x"},
			figure: func(rs []results) (string, string) {
				cpu := middle(values(rs, "BenchmarkTick", "cpu-ms/op"))
				size := middle(values(rs, "BenchmarkTick", "MB/frame"))
				return fmt.Sprintf("%.1f ms, %.1f MB a frame", cpu, size), target(cpu <= 25, "≤ 25 ms")
			},
		},
		{
			what: "Prometheus Collect + Gather, " + scrape + " commands, default (lean)",
			job:  job{"prom", "^BenchmarkCollectGather$/^commands=" + scrape + "$/^lean$", "5x"},
			figure: func(rs []results) (string, string) {
				name := "BenchmarkCollectGather/commands=" + scrape + "/lean"
				wall := middle(values(rs, name, "ns/op")) / 1e6
				series := middle(values(rs, name, "metrics/command"))
				allocs := middle(values(rs, name, "allocs/op"))
				return fmt.Sprintf("%.0f ms (%.0f CPU-ms), %.1f series a command, %.2f M allocs", wall,
						middle(values(rs, name, "cpu-ms/op")), series, allocs/1e6),
					sized(quick, "10,000 commands", wall <= 100 && series <= 15, "≤ 100 ms, ≤ 15 series a command")
			},
		},
		{
			what: "Execute under RunParallel on 2 cores against serial: distinct commands of one group / one shared command (distinct groups)",
			job:  execute("^BenchmarkExecuteScaling$"),
			figure: func(rs []results) (string, string) {
				scaling := func(sub string) float64 {
					return middle(ratios(rs, "BenchmarkExecuteScaling/serial", "BenchmarkExecuteScaling/"+sub, "ns/op"))
				}
				distinct, shared, groups := scaling("distinct-commands"), scaling("shared-command"), scaling("distinct-groups")
				return fmt.Sprintf("%.2f× / %.2f× (%.2f×)", distinct, shared, groups), target(distinct >= 1.6 && shared >= 1.3, "≥ 1.6× / ≥ 1.3×")
			},
		},
		{
			what: "semaphore Execute beyond the monotonic clock pair it reads",
			job:  execute("^BenchmarkClock$/^serial$|^BenchmarkExecuteSemaphoreNoTimeout$/^empty$/^serial$"),
			figure: func(rs []results) (string, string) {
				var beyond []float64
				for _, r := range rs {
					beyond = append(beyond, r["BenchmarkExecuteSemaphoreNoTimeout/empty/serial"]["ns/op"]-r["BenchmarkClock/serial"]["ns/op"])
				}
				allocs := middle(values(rs, "BenchmarkExecuteSemaphoreNoTimeout/empty/serial", "allocs/op"))
				return fmt.Sprintf("+%.0f ns, %.0f allocs", middle(beyond), allocs), target(middle(beyond) <= 80 && allocs == 0, "≤ +80 ns, 0 allocs")
			},
		},
		{
			what: "metrics Record",
			job:  job{"metrics", "^BenchmarkRecord$", perCall},
			figure: func(rs []results) (string, string) {
				ns := middle(values(rs, "BenchmarkRecord", "ns/op"))
				return fmt.Sprintf("%.1f ns", ns), target(ns <= 20, "≤ 20 ns")
			},
		},
		{
			what: "pool Execute with a timeout against raw ants Submit+wait of a closure returning a result",
			job:  execute("^BenchmarkExecutePool$/^empty$/^serial$|^BenchmarkAntsSubmitWaitResult$/^serial$"),
			figure: func(rs []results) (string, string) {
				ratio := middle(ratios(rs, "BenchmarkExecutePool/empty/serial", "BenchmarkAntsSubmitWaitResult/serial", "ns/op"))
				allocs := middle(values(rs, "BenchmarkExecutePool/empty/serial", "allocs/op"))
				return fmt.Sprintf("%.2f×, %.0f allocs", ratio, allocs), target(ratio <= 1.5 && allocs <= 2, "≤ 1.5×, ≤ 2 allocs")
			},
		},
		{
			what: "semaphore Execute with a timeout against the same call without",
			job:  execute("^BenchmarkExecuteSemaphore(No)?Timeout$/^empty$/^serial$"),
			figure: func(rs []results) (string, string) {
				ratio := middle(ratios(rs, "BenchmarkExecuteSemaphoreTimeout/empty/serial", "BenchmarkExecuteSemaphoreNoTimeout/empty/serial", "ns/op"))
				return fmt.Sprintf("%.2f×", ratio), target(ratio <= 2, "≤ 2×")
			},
		},
	}
}

// target is a row's verdict on the target what.
func target(met bool, what string) string {
	if met {
		return what + ": met"
	}
	return what + ": missed"
}

// sized is the verdict of a row whose target is for a size (such as "10,000 commands") that
// -quick does not measure.
func sized(quick bool, size string, met bool, what string) string {
	if quick {
		return what + " at " + size + ": not judged at this size"
	}
	return target(met, what)
}

// values returns name's figure in unit from each round that has it.
func values(rs []results, name, unit string) []float64 {
	var vs []float64
	for _, r := range rs {
		if v, ok := r[name][unit]; ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		check(fmt.Errorf("no %s figure for %s", unit, name))
	}
	return vs
}

// ratios returns, for each round, num's figure in unit over den's.
func ratios(rs []results, num, den, unit string) []float64 {
	var vs []float64
	for _, r := range rs {
		vs = append(vs, r[num][unit]/r[den][unit])
	}
	return vs
}

// middle returns the median of vs, the upper of the two middle values of an even count.
func middle[T cmp.Ordered](vs []T) T {
	return slices.Sorted(slices.Values(vs))[len(vs)/2]
}

// repoRoot returns the directory of the bulwark module this program is built against.
func repoRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/bulwark-go/bulwark").Output()
	if err != nil {
		return "", fmt.Errorf("finding the bulwark module: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// buildTest builds the test binary of the package in dir (from root) into tmp and returns its
// path. A package in a nested module (prom) is built in that module.
func buildTest(root, tmp, dir string) string {
	bin := filepath.Join(tmp, strings.ReplaceAll(dir, "/", "_")+".test")
	cmd := exec.Command("go", "test", "-c", "-o", bin, ".")
	cmd.Dir = filepath.Join(root, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		check(fmt.Errorf("building the tests of %s: %w\n%s", dir, err, out))
	}
	return bin
}

// runTest runs j with bin in dir and returns its figures.
func runTest(bin, dir string, j job) (results, error) {
	cmd := exec.Command(bin, "-test.run=^$", "-test.bench="+j.pattern, "-test.benchtime="+j.benchtime, "-test.benchmem")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s -test.bench=%s: %w\n%s", filepath.Base(bin), j.pattern, err, out)
	}
	r := parseBench(out)
	if len(r) == 0 {
		return nil, fmt.Errorf("%s -test.bench=%s: no benchmark ran\n%s", filepath.Base(bin), j.pattern, out)
	}
	return r, nil
}

// parseBench reads the result lines of go test -bench output ("BenchmarkX/y-2  N  12.3 ns/op
// 0 allocs/op ...").
func parseBench(out []byte) results {
	r := results{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		units := map[string]float64{}
		for k := 2; k+1 < len(f); k += 2 {
			if v, err := strconv.ParseFloat(f[k], 64); err == nil {
				units[f[k+1]] = v
			}
		}
		r[name] = units
	}
	return r
}
