package main

import (
	"bufio"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchmath"
)

// sample is one benchmark case with all its runs (rounds, or -count).
type sample struct {
	group  string    // benchmark function without "Benchmark", e.g. "CommandParallel"
	name   string    // sub-benchmark, e.g. "hystrix-go"
	ns     []float64 // wall time per call
	cpu    []float64 // the process's CPU time per call (cpu-ns/op), when reported
	bytes  []float64
	allocs []float64
}

// metric is a per-call time a benchmark line reports.
type metric int

const (
	wall metric = iota // ns/op
	cpu                // cpu-ns/op
)

// values returns the case's rounds of m (none when the lines did not report it).
func (s *sample) values(m metric) []float64 {
	if m == cpu {
		return s.cpu
	}
	return s.ns
}

// stat returns the case's rounds of m as a benchstat sample.
func (s *sample) stat(m metric) *benchmath.Sample {
	return benchmath.NewSample(slices.Clone(s.values(m)), &benchmath.DefaultThresholds)
}

// summary is benchstat's: the median of the rounds of m and its distribution-free 95% confidence
// interval (infinite with fewer than 6 rounds).
func (s *sample) summary(m metric) benchmath.Summary {
	return benchmath.AssumeNothing.Summary(s.stat(m), 0.95)
}

func (s *sample) medianNs() float64     { return s.summary(wall).Center }
func (s *sample) medianBytes() float64  { return median(s.bytes) }
func (s *sample) medianAllocs() float64 { return median(s.allocs) }

// results holds the parsed samples in the order they first appeared.
type results struct {
	order []*sample
	byKey map[string]*sample
}

func (r *results) get(group, name string) *sample { return r.byKey[group+"/"+name] }

// inGroup returns the samples of one group by name (the rounds run the cases in a shuffled
// order, so the order of appearance means nothing).
func (r *results) inGroup(group string) []*sample {
	var out []*sample
	for _, s := range r.order {
		if s.group == group {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *sample) int { return strings.Compare(a.name, b.name) })
	return out
}

// benchLine matches e.g. "BenchmarkCommand/hystrix-go-2   57104   6185 ns/op   1377 B/op   24 allocs/op".
var benchLine = regexp.MustCompile(`^Benchmark([^/\s]+)/(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(.*)$`)

var (
	cpuField    = regexp.MustCompile(`([\d.]+) cpu-ns/op`)
	bytesField  = regexp.MustCompile(`([\d.]+) B/op`)
	allocsField = regexp.MustCompile(`([\d.]+) allocs/op`)
)

// parse reads `go test -bench` output.
func parse(in io.Reader) (*results, error) {
	r := &results{byKey: map[string]*sample{}}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		ns, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, err
		}
		key := m[1] + "/" + m[2]
		s := r.byKey[key]
		if s == nil {
			s = &sample{group: m[1], name: m[2]}
			r.byKey[key] = s
			r.order = append(r.order, s)
		}
		s.ns = append(s.ns, ns)
		if f := cpuField.FindStringSubmatch(m[4]); f != nil {
			v, _ := strconv.ParseFloat(f[1], 64)
			s.cpu = append(s.cpu, v)
		}
		if f := bytesField.FindStringSubmatch(m[4]); f != nil {
			v, _ := strconv.ParseFloat(f[1], 64)
			s.bytes = append(s.bytes, v)
		}
		if f := allocsField.FindStringSubmatch(m[4]); f != nil {
			v, _ := strconv.ParseFloat(f[1], 64)
			s.allocs = append(s.allocs, v)
		}
	}
	return r, sc.Err()
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
