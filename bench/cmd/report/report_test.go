package main

import (
	"strings"
	"testing"
)

const sampleOutput = `goos: linux
BenchmarkCommand/bulwark-semaphore-2   	 1000	       100.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkCommand/bulwark-semaphore-2   	 1000	       120.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkCommand/bulwark-semaphore-2   	 1000	       110.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkCommand/hystrix-go-2          	 1000	      6000 ns/op	    1377 B/op	      24 allocs/op
BenchmarkCommand/failsafe-go-2         	 1000	       900 ns/op	     968 B/op	      25 allocs/op
PASS
`

func TestParseAndTargets(t *testing.T) {
	r, err := parse(strings.NewReader(sampleOutput))
	if err != nil {
		t.Fatal(err)
	}
	s := r.get("Command", "bulwark-semaphore")
	if s == nil || len(s.ns) != 3 || s.medianNs() != 110 {
		t.Fatalf("bulwark-semaphore: %+v", s)
	}
	if h := r.get("Command", "hystrix-go"); h == nil || h.medianAllocs() != 24 || h.medianBytes() != 1377 {
		t.Fatalf("hystrix-go: %+v", h)
	}
	ts := targets("")
	if got := evaluate(r, ts[0]); !strings.Contains(got, "8.2×") || !strings.Contains(got, "missed") {
		t.Errorf("failsafe target: %s", got)
	}
	if got := evaluate(r, ts[1]); !strings.Contains(got, "54.5×") || !strings.Contains(got, "met") {
		t.Errorf("hystrix target: %s", got)
	}
	if got := evaluate(r, ts[3]); !strings.Contains(got, "0 allocs: **met**") {
		t.Errorf("allocs target: %s", got)
	}
	if got := evaluate(r, ts[4]); !strings.Contains(got, "not run") || !strings.Contains(ts[4].what, "pool") {
		t.Errorf("pool target without pool: %s", got)
	}
}

func TestMedianEven(t *testing.T) {
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median = %v", m)
	}
}

func TestWriteSVG(t *testing.T) {
	r, err := parse(strings.NewReader(sampleOutput))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	writeSVG(&b, r, sections, "a <subtitle>")
	out := b.String()
	for _, want := range []string{"<svg", "bulwark-semaphore", "a &lt;subtitle&gt;", "10 µs", "</svg>"} {
		if !strings.Contains(out, want) {
			t.Errorf("svg lacks %q", want)
		}
	}
}
