package main

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"
)

// Chart geometry, in SVG user units.
const (
	chartW      = 960
	plotLeft    = 180
	plotRight   = 930
	plotTop     = 78
	plotBottom  = 318
	stripTop    = 356 // first breaker strip
	stripH      = 14
	stripGap    = 8
	chartMargin = 40 // below the last strip
)

// Chart colours.
const (
	colorWithout  = "#f58518"
	colorWith     = "#4c78a8"
	colorDegraded = "#9ecae9"
	colorFault    = "#eeeeee"
	colorOpen     = "#d62728"
	colorHalfOpen = "#ffbb78"
	colorGrid     = "#dddddd"
	colorText     = "#333333"
)

// chartBin is how many slots the chart sums into one point: 500 ms.
const chartBin = 5

// chartHeadroom is how far above the entry rate the y axis may go.
const chartHeadroom = 1.5

// writeChartFile writes the chart of r to the file name.
func writeChartFile(name string, p ChainParams, r ChainResult) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	writeChart(w, p, r)
	return errors.Join(w.Flush(), f.Close())
}

// writeChart draws the first service's ok answers per second over time, for
// both runs, with the degraded answers of the run with breakers, the fault
// shaded, and below the plot one strip per breaker showing when it was open
// or half-open. Write errors are left to the caller's writer.
func writeChart(w io.Writer, p ChainParams, r ChainResult) {
	breakers := r.With.Breakers
	height := stripTop + len(breakers)*(stripH+stripGap) + chartMargin
	secs := p.Duration.Seconds()
	x := func(t time.Duration) float64 { return plotLeft + (plotRight-plotLeft)*t.Seconds()/secs }
	// The axis ends above the entry rate: a drained queue's burst is
	// clipped and labelled (series), so it does not flatten the rest.
	top := niceCeil(min(max(p.Rate, maxRate(r.Without.OK), maxRate(r.With.OK), maxRate(r.With.Degraded)), chartHeadroom*p.Rate))
	y := func(v float64) float64 { return plotBottom - (plotBottom-plotTop)*min(v, top)/top }

	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12" fill="%s">`+"\n",
		chartW, height, chartW, height, colorText)
	fmt.Fprintf(w, `<rect width="%d" height="%d" fill="white"/>`+"\n", chartW, height)
	text(w, plotLeft, 24, "start", 15, "Chain gateway → order → inventory: the gateway's ok answers per second (500 ms bins)")
	text(w, plotLeft, 44, "start", 12, fmt.Sprintf(
		"%g req/s, %d threads per service, retries %d; %v–%v: inventory's calls %g%% errors, %g%% delayed %v; open %v; seed %d",
		p.Rate, p.Workers, p.Retries, p.FaultStart, p.FaultEnd, 100*p.Errors, 100*p.Slow, p.Delay, p.Open, p.Seed))

	// The fault, then the breaker-open time of the breakers, as bands.
	fmt.Fprintf(w, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n",
		x(p.FaultStart), plotTop, x(p.FaultEnd)-x(p.FaultStart), plotBottom-plotTop, colorFault)
	text(w, (x(p.FaultStart)+x(p.FaultEnd))/2, plotTop+14, "middle", 11, "fault in front of inventory")

	// Grid and axes.
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", plotLeft, y(v), plotRight, y(v), colorGrid)
		text(w, plotLeft-6, y(v)+4, "end", 11, fmt.Sprintf("%g", v))
	}
	step := tickStep(secs)
	for s := 0.0; s <= secs+1e-9; s += step {
		t := time.Duration(s * float64(time.Second))
		fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x(t), plotBottom, x(t), plotBottom+4, colorText)
		text(w, x(t), plotBottom+17, "middle", 11, fmt.Sprintf("%gs", s))
	}
	fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s"/>`+"\n", plotLeft, plotBottom, plotRight, plotBottom, colorText)
	fmt.Fprintf(w, `<text x="%d" y="%d" transform="rotate(-90 %d %d)" text-anchor="middle" font-size="11">answers/s</text>`+"\n",
		plotLeft-50, (plotTop+plotBottom)/2, plotLeft-50, (plotTop+plotBottom)/2)

	// The series.
	series(w, r.Without.OK, x, y, top, colorWithout, 4, "") // wider, so that it shows under the other where they agree
	series(w, r.With.OK, x, y, top, colorWith, 2, "")
	series(w, r.With.Degraded, x, y, top, colorDegraded, 2, "4 3")
	legend := []struct{ color, dash, label string }{
		{colorWithout, "", "ok, without breakers"},
		{colorWith, "", "ok, with breakers"},
		{colorDegraded, "4 3", "degraded (fallback), with breakers"},
	}
	lx := float64(plotLeft) + 10
	for _, l := range legend {
		fmt.Fprintf(w, `<line x1="%.1f" y1="62" x2="%.1f" y2="62" stroke="%s" stroke-width="2.5" stroke-dasharray="%s"/>`+"\n",
			lx, lx+22, l.color, dashOrNone(l.dash))
		text(w, lx+28, 66, "start", 11, l.label)
		lx += 40 + 6.5*float64(len(l.label))
	}

	// One strip per breaker: open and half-open time.
	for i, h := range breakers {
		top := stripTop + i*(stripH+stripGap)
		text(w, plotLeft-6, float64(top+stripH-3), "end", 11, h.Name)
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n",
			plotLeft, top, plotRight-plotLeft, stripH, colorGrid)
		for _, sp := range notClosedSpans(h.Transitions, p.Duration) {
			color := colorOpen
			if sp.halfOpen {
				color = colorHalfOpen
			}
			fmt.Fprintf(w, `<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s"/>`+"\n",
				x(sp.from), top, max(x(sp.to)-x(sp.from), 0.5), stripH, color)
		}
	}
	legendY := stripTop + len(breakers)*(stripH+stripGap) + 14
	text(w, plotLeft, float64(legendY), "start", 11, "breakers (with breakers):")
	for i, l := range []struct{ color, label string }{{colorOpen, "open"}, {colorHalfOpen, "half-open"}} {
		bx := plotLeft + 150 + i*90
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="12" height="10" fill="%s"/>`+"\n", bx, legendY-9, l.color)
		text(w, float64(bx+16), float64(legendY), "start", 11, l.label)
	}
	fmt.Fprintln(w, "</svg>")
}

// span is a stretch of time a breaker spent open (or half-open).
type span struct {
	from, to time.Duration
	halfOpen bool
}

// notClosedSpans turns a breaker's transitions into the spans it was not
// closed, up to end.
func notClosedSpans(ts []BreakerTransition, end time.Duration) []span {
	var out []span
	for i, t := range ts {
		if t.To == "closed" {
			continue
		}
		to := end
		if i+1 < len(ts) {
			to = time.Duration(ts[i+1].AtMS * float64(time.Millisecond))
		}
		out = append(out, span{from: time.Duration(t.AtMS * float64(time.Millisecond)), to: to, halfOpen: t.To == "half-open"})
	}
	return out
}

// series draws counts per slot, summed into chartBin slots, as answers per
// second at the middle of each bin; y clips at top, and the highest
// clipped bin is labelled with its rate.
func series(w io.Writer, counts []int, x func(time.Duration) float64, y func(float64) float64, top float64,
	color string, width int, dash string) {
	var b strings.Builder
	peak, peakAt := 0.0, time.Duration(0)
	for i := 0; i+chartBin <= len(counts); i += chartBin {
		n := 0
		for _, v := range counts[i : i+chartBin] {
			n += v
		}
		mid := time.Duration(i)*slot + chartBin*slot/2
		rate := float64(n) / (chartBin * slot).Seconds()
		if rate > max(top, peak) {
			peak, peakAt = rate, mid
		}
		fmt.Fprintf(&b, "%.1f,%.1f ", x(mid), y(rate))
	}
	fmt.Fprintf(w, `<polyline points="%s" fill="none" stroke="%s" stroke-width="%d" stroke-dasharray="%s"/>`+"\n",
		strings.TrimSpace(b.String()), color, width, dashOrNone(dash))
	if peak > 0 {
		text(w, x(peakAt)+6, y(top)+12, "start", 11, fmt.Sprintf("↑ %.0f/s (a queue drains)", peak))
	}
}

// maxRate returns the highest rate per second of counts in chart bins.
func maxRate(counts []int) float64 {
	best := 0
	for i := 0; i+chartBin <= len(counts); i += chartBin {
		n := 0
		for _, v := range counts[i : i+chartBin] {
			n += v
		}
		best = max(best, n)
	}
	return float64(best) / (chartBin * slot).Seconds()
}

// niceCeil rounds v > 0 up to 1, 2 or 5 times a power of ten, so that the
// y axis has round labels in quarters.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 4, 5, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// tickStep returns the x-axis tick spacing in seconds for a run of secs
// seconds: at most about 12 ticks.
func tickStep(secs float64) float64 {
	for _, s := range []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600} {
		if secs/s <= 12 {
			return s
		}
	}
	return math.Ceil(secs/12/600) * 600
}

func dashOrNone(d string) string {
	if d == "" {
		return "none"
	}
	return d
}

// text writes an escaped SVG text element.
func text(w io.Writer, x, y float64, anchor string, size int, s string) {
	fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="%s" font-size="%d">`, x, y, anchor, size)
	_ = xml.EscapeText(w, []byte(s))
	fmt.Fprintln(w, "</text>")
}
