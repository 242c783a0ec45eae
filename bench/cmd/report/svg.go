package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// Chart geometry.
const (
	chartWidth  = 960
	labelWidth  = 230
	valueWidth  = 150 // right margin for the numbers
	rowHeight   = 26
	barHeight   = 10
	headHeight  = 30
	topMargin   = 70
	axisHeight  = 30
	colorSerial = "#4c78a8"
	colorPar    = "#f58518"
	colorOurs   = "#2ca02c"
	colorOursP  = "#98df8a"
)

// section is one group of cases in the chart, with serial and parallel variants.
type section struct {
	title            string
	serial, parallel string // group names in the results
	highlightPrefix  string // cases whose name starts with it are drawn in our colours
}

// writeSVG draws a horizontal bar chart of median ns/op on a log scale: per case a serial and a
// parallel bar, grouped by section.
func writeSVG(w io.Writer, r *results, sections []section, subtitle string) {
	type row struct {
		label    string
		ser, par float64
		ours     bool
		head     bool
	}
	var rows []row
	lo, hi := math.Inf(1), 0.0
	for _, sec := range sections {
		cases := r.inGroup(sec.serial)
		if len(cases) == 0 {
			continue
		}
		rows = append(rows, row{label: sec.title, head: true})
		for _, s := range cases {
			rw := row{label: s.name, ser: s.medianNs(), ours: strings.HasPrefix(s.name, sec.highlightPrefix)}
			if p := r.get(sec.parallel, s.name); p != nil {
				rw.par = p.medianNs()
			}
			for _, v := range []float64{rw.ser, rw.par} {
				if v > 0 {
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
			}
			rows = append(rows, rw)
		}
	}
	if hi == 0 {
		lo, hi = 1, 10
	}
	minExp := math.Floor(math.Log10(lo))
	maxExp := math.Ceil(math.Log10(hi))
	if maxExp == minExp {
		maxExp++
	}
	barMax := float64(chartWidth - labelWidth - valueWidth)
	x := func(v float64) float64 {
		if v <= 0 {
			return 0
		}
		return (math.Log10(v) - minExp) / (maxExp - minExp) * barMax
	}

	height := topMargin + axisHeight + 20
	for _, rw := range rows {
		if rw.head {
			height += headHeight
		} else {
			height += rowHeight
		}
	}

	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartWidth, height, chartWidth, height)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(w, `<text x="10" y="22" font-size="16" font-weight="bold">Overhead per protected call (median ns/op, log scale; shorter is better)</text>`+"\n")
	fmt.Fprintf(w, `<text x="10" y="40" fill="#555">%s</text>`+"\n", html.EscapeString(subtitle))
	legend := []struct{ color, text string }{
		{colorOurs, "bulwark, serial"}, {colorOursP, "bulwark, parallel"},
		{colorSerial, "others, serial"}, {colorPar, "others, parallel"},
	}
	for i, l := range legend {
		lx := 10 + i*170
		fmt.Fprintf(w, `<rect x="%d" y="50" width="12" height="12" fill="%s"/><text x="%d" y="60">%s</text>`+"\n", lx, l.color, lx+16, l.text)
	}

	y := topMargin
	// Grid lines at powers of ten.
	gridTop, gridBottom := y, height-axisHeight-10
	for e := minExp; e <= maxExp; e++ {
		gx := float64(labelWidth) + x(math.Pow(10, e))
		fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", gx, gridTop, gx, gridBottom)
		fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", gx, gridBottom+16, axisLabel(e))
	}
	for _, rw := range rows {
		if rw.head {
			fmt.Fprintf(w, `<text x="10" y="%d" font-weight="bold" font-size="13">%s</text>`+"\n", y+20, html.EscapeString(rw.label))
			y += headHeight
			continue
		}
		cs, cp := colorSerial, colorPar
		if rw.ours {
			cs, cp = colorOurs, colorOursP
		}
		weight := "normal"
		if rw.ours {
			weight = "bold"
		}
		fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="end" font-weight="%s">%s</text>`+"\n", labelWidth-8, y+16, weight, html.EscapeString(rw.label))
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>serial %s</title></rect>`+"\n",
			labelWidth, y+3, math.Max(x(rw.ser), 1), barHeight, cs, formatNs(rw.ser))
		if rw.par > 0 {
			fmt.Fprintf(w, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>parallel %s</title></rect>`+"\n",
				labelWidth, y+3+barHeight, math.Max(x(rw.par), 1), barHeight, cp, formatNs(rw.par))
		}
		end := float64(labelWidth) + math.Max(x(rw.ser), x(rw.par))
		fmt.Fprintf(w, `<text x="%.1f" y="%d" fill="#333">%s / %s</text>`+"\n", end+6, y+17, formatNs(rw.ser), formatNs(rw.par))
		y += rowHeight
	}
	fmt.Fprintln(w, `</svg>`)
}

// axisLabel names the power of ten 10^e nanoseconds.
func axisLabel(e float64) string {
	units := []string{"ns", "µs", "ms", "s"}
	i := min(int(e)/3, len(units)-1)
	return fmt.Sprintf("%g %s", math.Pow(10, e-float64(3*i)), units[i])
}

// formatNs prints a duration in nanoseconds compactly.
func formatNs(v float64) string {
	switch {
	case v <= 0:
		return "-"
	case v >= 10000:
		return fmt.Sprintf("%.1f µs", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f ns", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ns", v)
	default:
		return fmt.Sprintf("%.2f ns", v)
	}
}
