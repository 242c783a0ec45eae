package stat

import (
	"bytes"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	cases := []struct {
		p    float64
		want time.Duration
	}{{0, time.Millisecond}, {50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}}
	for _, c := range cases {
		if got := Percentile(ds, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("empty: %v", got)
	}
	if got := Max([]time.Duration{3, 9, 1}); got != 9 {
		t.Errorf("max: %v", got)
	}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	Table(&b, []string{"a", "b"}, [][]string{{"1", "2"}})
	want := "| a | b |\n| --- | --- |\n| 1 | 2 |\n"
	if b.String() != want {
		t.Errorf("got %q", b.String())
	}
}
