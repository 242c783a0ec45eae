package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/metrics"
)

// drillSpec is what a report says about the drill itself.
type drillSpec struct {
	Fault  string   // the preset's name
	What   string   // what the fault does
	Faulty string   // the route whose dependency got the fault
	Routes []string // every route, in the order of the report
	Rate   int      // requests per second per route
}

// phaseNames name the phases between the script's marks.
var phaseNames = [numMarks - 1]string{"warm", "hold", "after"}

const (
	phaseWarm = iota
	phaseHold
	phaseAfter
)

// report is a drill's report. Instants are milliseconds from the
// injection (negative: during the warm phase); docs/drills.md defines
// every field.
type report struct {
	Fault     string  `json:"fault"`
	What      string  `json:"what"`
	Faulty    string  `json:"faulty_route"`
	Rate      int     `json:"rate_per_route"`
	WarmMS    float64 `json:"warm_ms"`
	HoldMS    float64 `json:"hold_ms"`
	ObserveMS float64 `json:"observe_ms"`

	Breakers []breakerReport `json:"breakers"`
	Timeline []timelineEntry `json:"timeline"`
	Routes   []routeReport   `json:"routes"`
	Fallback fallbackReport  `json:"fallback"`
	Recovery recoveryReport  `json:"recovery"`
	Healthy  []healthyReport `json:"healthy_routes"`
}

// breakerReport is what one breaker did during the drill.
type breakerReport struct {
	Name        string   `json:"name"`
	Route       string   `json:"route"`
	Opened      int      `json:"opened"`        // transitions to open
	FirstOpenMS *float64 `json:"first_open_ms"` // null: it never opened
	LastCloseMS *float64 `json:"last_close_ms"` // its last transition to closed after it first opened; null: none
	NotClosedMS float64  `json:"not_closed_ms"` // time open or half-open between the start and the end
	EndState    string   `json:"end_state"`
}

// timelineEntry is one transition of a watched breaker.
type timelineEntry struct {
	AtMS       float64 `json:"at_ms"`
	Breaker    string  `json:"breaker"`
	From       string  `json:"from"`
	To         string  `json:"to"`
	Reason     string  `json:"reason"`
	Requests   int64   `json:"window_requests"`    // calls in the breaker's window when it moved
	ErrorRatio float64 `json:"window_error_ratio"` // their share of failures and timeouts
}

// routeReport is a route's calls, per phase.
type routeReport struct {
	Route  string       `json:"route"`
	Faulty bool         `json:"faulty"`
	Phases []phaseStats `json:"phases"`
}

// phaseStats counts the calls that started in one phase.
type phaseStats struct {
	Phase    string  `json:"phase"`
	Calls    int     `json:"calls"`
	OK       int     `json:"ok"`       // the backend's answer
	Fallback int     `json:"fallback"` // the fallback's answer
	Errors   int     `json:"errors"`   // no answer: an error, or none at all
	Reached  int     `json:"reached"`  // calls whose Run ran: let through to the dependency by the breakers and the bulkhead
	Arrived  int     `json:"arrived"`  // requests of the phase's calls that arrived at the backend
	P50MS    float64 `json:"p50_ms"`
	P99MS    float64 `json:"p99_ms"`
	// LagMaxMS is the most a call was sent after its scheduled time.
	// Large, it says that the machine was slow, not only the service:
	// every latency of the phase carries it.
	LagMaxMS float64 `json:"send_lag_max_ms"`
}

// fallbackReport is the faulty route's fallbacks, from the injection to
// the end.
type fallbackReport struct {
	Needed int            `json:"needed"` // calls for which a fallback was considered
	Served int            `json:"served"` // FALLBACK_SUCCESS
	Rate   *float64       `json:"rate"`   // Served / Needed; null when none was needed
	Why    map[string]int `json:"why"`    // the primary events of the calls that needed one
}

// recoveryReport is how long the service took to recover after the
// removal.
type recoveryReport struct {
	// BreakersClosedMS runs from the removal to the last close of the
	// breakers that opened (0 if they had all closed before the removal);
	// null when one of them was not closed at the end, or none opened.
	BreakersClosedMS *float64 `json:"breakers_closed_ms"`
	LastClosed       string   `json:"last_closed"` // the breaker that closed last
	// AnswersGoodMS runs from the removal to the start of the first
	// 100 ms after it in which the share of the faulty route's calls
	// that got the backend's answer was back to 95% of its warm share;
	// null when it never was.
	AnswersGoodMS *float64 `json:"answers_good_ms"`
}

// healthyReport is the blast radius on one healthy route.
type healthyReport struct {
	Route        string  `json:"route"`
	WarmP99MS    float64 `json:"warm_p99_ms"`
	HoldP99MS    float64 `json:"hold_p99_ms"`
	HoldOverWarm float64 `json:"hold_over_warm"`      // HoldP99MS / WarmP99MS
	HoldCalls    int     `json:"hold_calls"`          // calls that started during the hold
	Affected     int     `json:"hold_affected"`       // of them, answered by a fallback or not at all
	Transitions  int     `json:"breaker_transitions"` // of the route's breakers, during the whole drill
}

// buildReport computes the report of a drill from its log and spec. It
// reads nothing else (no clock): the same log gives the same report.
func buildReport(l drillLog, s drillSpec) report {
	inject, remove := l.Marks[markInject], l.Marks[markRemove]
	r := report{Fault: s.Fault, What: s.What, Faulty: s.Faulty, Rate: s.Rate,
		WarmMS: ms(inject - l.Marks[markStart]), HoldMS: ms(remove - inject), ObserveMS: ms(l.Marks[markEnd] - remove)}
	rel := func(t time.Duration) float64 { return ms(t - inject) }

	transitions := slices.Clone(l.Transitions)
	slices.SortStableFunc(transitions, func(a, b transition) int { return cmp.Compare(a.At, b.At) })
	for _, t := range transitions {
		r.Timeline = append(r.Timeline, timelineEntry{AtMS: rel(t.At), Breaker: t.Name, From: t.From.String(), To: t.To.String(),
			Reason: string(t.Reason), Requests: t.Health.Requests, ErrorRatio: round(t.Health.ErrorRatio, 10000)})
	}

	var lastClose time.Duration
	allClosed, anyOpened := true, false
	for _, w := range l.Breakers {
		b := breakerOf(w, transitions, l.Marks[markStart], l.Marks[markEnd], rel)
		r.Breakers = append(r.Breakers, b.breakerReport)
		if b.Opened == 0 {
			continue
		}
		anyOpened = true
		if b.EndState != circuit.Closed.String() {
			allClosed = false
		} else if b.lastClose >= lastClose {
			lastClose, r.Recovery.LastClosed = b.lastClose, w.Name
		}
	}
	if anyOpened && allClosed {
		r.Recovery.BreakersClosedMS = ptr(ms(max(lastClose-remove, 0)))
	} else {
		r.Recovery.LastClosed = ""
	}

	byRoute := map[string][]call{}
	for _, c := range l.Calls {
		byRoute[c.Route] = append(byRoute[c.Route], c)
	}
	for _, route := range s.Routes {
		calls := byRoute[route]
		rr := routeReport{Route: route, Faulty: route == s.Faulty}
		for ph := range phaseNames {
			rr.Phases = append(rr.Phases, phaseOf(ph, l, route, calls))
		}
		r.Routes = append(r.Routes, rr)
		if route == s.Faulty {
			r.Fallback = fallbacksOf(calls, inject)
			r.Recovery.AnswersGoodMS = answersGood(calls, l.Marks)
			continue
		}
		h := healthyReport{Route: route, WarmP99MS: rr.Phases[phaseWarm].P99MS, HoldP99MS: rr.Phases[phaseHold].P99MS,
			HoldCalls: rr.Phases[phaseHold].Calls, Affected: rr.Phases[phaseHold].Fallback + rr.Phases[phaseHold].Errors}
		if h.WarmP99MS > 0 {
			h.HoldOverWarm = round(h.HoldP99MS/h.WarmP99MS, 100)
		}
		for _, t := range transitions {
			if t.Route == route {
				h.Transitions++
			}
		}
		r.Healthy = append(r.Healthy, h)
	}
	return r
}

// breakerSummary is a breakerReport with the instant of its last close.
type breakerSummary struct {
	breakerReport
	lastClose time.Duration
}

// breakerOf sums up what the watched breaker w did between start and end,
// from the drill's transitions (in time order).
func breakerOf(w watched, transitions []transition, start, end time.Duration, rel func(time.Duration) float64) breakerSummary {
	b := breakerSummary{breakerReport: breakerReport{Name: w.Name, Route: w.Route}}
	state, since := w.Initial, start
	var notClosed time.Duration
	// notClosedUntil adds the time from since to until, clipped to the
	// drill, if the breaker was not closed then.
	notClosedUntil := func(until time.Duration) {
		if from, to := max(since, start), min(until, end); state != circuit.Closed && to > from {
			notClosed += to - from
		}
	}
	for _, t := range transitions {
		if t.Name != w.Name {
			continue
		}
		notClosedUntil(t.At)
		state, since = t.To, t.At
		switch {
		case t.To == circuit.Open:
			b.Opened++
			if b.FirstOpenMS == nil {
				b.FirstOpenMS = ptr(rel(t.At))
			}
		case t.To == circuit.Closed && b.FirstOpenMS != nil:
			b.LastCloseMS, b.lastClose = ptr(rel(t.At)), t.At
		}
	}
	notClosedUntil(end)
	b.NotClosedMS, b.EndState = ms(notClosed), state.String()
	return b
}

// phaseOf counts the calls of route that started in phase ph, and the
// backend's arrivals of their requests.
func phaseOf(ph int, l drillLog, route string, calls []call) phaseStats {
	from, to := l.Marks[ph], l.Marks[ph+1]
	p := phaseStats{Phase: phaseNames[ph]}
	var latencies []time.Duration
	for _, c := range calls {
		if c.Start < from || c.Start >= to {
			continue
		}
		p.Calls++
		latencies = append(latencies, c.Latency)
		p.LagMaxMS = max(p.LagMaxMS, ms(c.Lag))
		switch c.Outcome {
		case outcomeOK:
			p.OK++
		case outcomeFallback:
			p.Fallback++
		default:
			p.Errors++
		}
		if ranRun(c.Event) {
			p.Reached++
		}
	}
	for _, a := range l.Arrivals {
		if a.Route == route && a.At >= from && a.At < to {
			p.Arrived++
		}
	}
	slices.Sort(latencies)
	p.P50MS, p.P99MS = ms(percentile(latencies, 50)), ms(percentile(latencies, 99))
	return p
}

// ranRun reports whether a call of primary event e ran its Run: the calls
// the breakers count, the only ones that reached the dependency.
func ranRun(e string) bool {
	switch e {
	case metrics.Success.String(), metrics.Failure.String(), metrics.Timeout.String():
		return true
	}
	return false
}

// fallbacksOf counts the fallbacks of calls that started from the
// injection on.
func fallbacksOf(calls []call, inject time.Duration) fallbackReport {
	f := fallbackReport{Why: map[string]int{}}
	for _, c := range calls {
		if c.Start < inject || c.Fallback == "" {
			continue
		}
		f.Needed++
		f.Why[c.Event]++
		if c.Fallback == metrics.FallbackSuccess.String() {
			f.Served++
		}
	}
	if f.Needed > 0 {
		f.Rate = ptr(round(float64(f.Served)/float64(f.Needed), 10000))
	}
	return f
}

// Recovery of the answers: the first bucket after the removal in which
// the faulty route's share of good answers is back to recoveredShare of
// its warm share.
const (
	recoveryBucket = 100 * time.Millisecond
	recoveredShare = 0.95
)

// answersGood returns the time from the removal to the start of the first
// recoveryBucket after it in which the share of calls (that started in
// it) that got the backend's answer was back to recoveredShare of the
// warm phase's; nil if there was none, or no warm call to compare with.
func answersGood(calls []call, marks [numMarks]time.Duration) *float64 {
	warm, ok := okShare(calls, marks[markStart], marks[markInject])
	if !ok {
		return nil
	}
	remove := marks[markRemove]
	for from := remove; from < marks[markEnd]; from += recoveryBucket {
		if s, ok := okShare(calls, from, from+recoveryBucket); ok && s >= recoveredShare*warm {
			return ptr(ms(from - remove))
		}
	}
	return nil
}

// okShare returns the share of the calls that started in [from, to) that
// got the backend's answer, and false if none started then.
func okShare(calls []call, from, to time.Duration) (float64, bool) {
	var n, ok int
	for _, c := range calls {
		if c.Start >= from && c.Start < to {
			n++
			if c.Outcome == outcomeOK {
				ok++
			}
		}
	}
	if n == 0 {
		return 0, false
	}
	return float64(ok) / float64(n), true
}

// percentile returns the nearest-rank p-th percentile of sorted, or 0.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank-1, 0)]
}

// ms returns d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 1000) }

// round rounds x to 1/per.
func round(x, per float64) float64 { return math.Round(x*per) / per }

func ptr[T any](v T) *T { return &v }

// write prints r for a person.
func (r report) write(w io.Writer) {
	fmt.Fprintf(w, "Drill %q on %s: %s.\n", r.Fault, r.Faulty, r.What)
	fmt.Fprintf(w, "Script: warm %s, inject, hold %s, remove, observe %s; %d req/s per route, open loop. "+
		"Times are ms from the injection.\n", secs(r.WarmMS), secs(r.HoldMS), secs(r.ObserveMS), r.Rate)

	fmt.Fprintln(w, "\nBreakers")
	tw := table(w)
	fmt.Fprintln(tw, "  breaker\topened\tfirst open\tlast close\tnot closed ms\tat the end")
	for _, b := range r.Breakers {
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%.0f\t%s\n", b.Name, b.Opened, msOrDash(b.FirstOpenMS), msOrDash(b.LastCloseMS), b.NotClosedMS, b.EndState)
	}
	_ = tw.Flush()

	fmt.Fprintln(w, "\nTimeline")
	if len(r.Timeline) == 0 {
		fmt.Fprintln(w, "  no breaker changed state")
	}
	tw = table(w)
	for _, t := range r.Timeline {
		fmt.Fprintf(tw, "  %.0f\t%s\t%s -> %s\t%s\twindow: %d, %.0f%% failed\n", t.AtMS, t.Breaker, t.From, t.To, t.Reason, t.Requests, 100*t.ErrorRatio)
	}
	_ = tw.Flush()

	fmt.Fprintln(w, "\nCalls by the phase they started in")
	tw = table(w)
	fmt.Fprintln(tw, "  route\tphase\tcalls\tok\tfallback\terrors\treached\tarrived\tp50 ms\tp99 ms\tsend lag max ms")
	for _, rr := range r.Routes {
		for i, p := range rr.Phases {
			route := ""
			if i == 0 {
				route = rr.Route
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\n",
				route, p.Phase, p.Calls, p.OK, p.Fallback, p.Errors, p.Reached, p.Arrived, p.P50MS, p.P99MS, p.LagMaxMS)
		}
	}
	_ = tw.Flush()

	fmt.Fprintf(w, "\nFaulty dependency (%s)\n", r.Faulty)
	for _, rr := range r.Routes {
		if rr.Faulty {
			hold, after := rr.Phases[phaseHold], rr.Phases[phaseAfter]
			fmt.Fprintf(w, "  let through to it by the breakers and the bulkhead: %d of %d calls in the hold, %d of %d after\n", hold.Reached, hold.Calls, after.Reached, after.Calls)
			fmt.Fprintf(w, "  arrived at the backend: %d in the hold, %d after\n", hold.Arrived, after.Arrived)
		}
	}
	f := r.Fallback
	if f.Rate == nil {
		fmt.Fprintln(w, "  fallbacks: none needed")
	} else {
		fmt.Fprintf(w, "  fallbacks: %d needed, %d served (%.1f%%); needed after %s\n", f.Needed, f.Served, 100**f.Rate, why(f.Why))
	}

	fmt.Fprintf(w, "\nRecovery, from the removal at %.0f ms\n", r.HoldMS)
	switch rc := r.Recovery; {
	case rc.BreakersClosedMS != nil:
		fmt.Fprintf(w, "  breakers closed after %.0f ms (the last: %s)\n", *rc.BreakersClosedMS, rc.LastClosed)
	case r.opened():
		fmt.Fprintln(w, "  breakers: not all closed by the end")
	default:
		fmt.Fprintln(w, "  breakers: none opened")
	}
	if a := r.Recovery.AnswersGoodMS; a != nil {
		fmt.Fprintf(w, "  answers good again after %.0f ms (the first %v in which %s's share of the backend's answers was back to %.0f%% of warm)\n",
			*a, recoveryBucket, r.Faulty, 100*recoveredShare)
	} else {
		fmt.Fprintf(w, "  answers: %s's share of the backend's answers was never back to %.0f%% of warm\n", r.Faulty, 100*recoveredShare)
	}

	fmt.Fprintln(w, "\nHealthy routes (blast radius)")
	for _, h := range r.Healthy {
		fmt.Fprintf(w, "  %s: p99 %.1f ms in the hold against %.1f ms warm (%.2fx); %d of %d calls in the hold degraded or failed; %d breaker transitions\n",
			h.Route, h.HoldP99MS, h.WarmP99MS, h.HoldOverWarm, h.Affected, h.HoldCalls, h.Transitions)
	}
}

// opened reports whether any breaker opened.
func (r report) opened() bool {
	return slices.ContainsFunc(r.Breakers, func(b breakerReport) bool { return b.Opened > 0 })
}

func table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

func msOrDash(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f", *v)
}

func secs(msecs float64) string {
	return (time.Duration(msecs * float64(time.Millisecond))).Round(10 * time.Millisecond).String()
}

// why formats the counts of primary events, largest first.
func why(m map[string]int) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", m[k], k)
	}
	return strings.Join(parts, ", ")
}
