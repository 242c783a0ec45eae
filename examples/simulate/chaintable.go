package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
)

// The source's figures for its fault-injection replay of the chain: a
// constant entry rate, order's pool, the fault, and what the entry kept.
const (
	sourceRate          = 1200.0 // req/s entering the gateway
	sourceOrderThreads  = 200    // order's pool
	sourceWithoutDuring = 150.0  // req/s at the entry during the fault, without breakers
	sourceAmplification = 8.0    // the source's "8× amplification": 1,200 / 150
	sourceWithLoss      = 0.21   // the share of the entry's throughput lost with breakers
)

// printChainTable prints the chain scenario's parameters, then the source's
// figures beside the model's, then what only the model measures.
func printChainTable(w io.Writer, p ChainParams, r ChainResult) error {
	fmt.Fprintf(w, "chain gateway -> order -> inventory, replayed on a virtual clock through bulwark's command groups\n")
	fmt.Fprintf(w, "entry: %g req/s into gateway, evenly spaced, for %v; %s for order's stock endpoint (calls inventory),\n",
		p.Rate, p.Duration, pct(p.StockShare))
	fmt.Fprintf(w, "  the others for its history endpoint (does not)\n")
	fmt.Fprintf(w, "services: %d threads each, shared by all its endpoints, and a queue of %d beyond them (then refused at once)\n",
		p.Workers, p.Queue)
	fmt.Fprintf(w, "work: %v at gateway and at order before they call on; order's history answers then; inventory answers in %v\n",
		p.Work, p.Latency)
	fmt.Fprintf(w, "timeouts: client on gateway %v, gateway on order %v, order on inventory %v (in Run: bulwark counts FAILURE)\n",
		p.ClientTimeout, p.GatewayTimeout, p.OrderTimeout)
	budget := "no budget"
	if p.RetryBudget > 0 {
		budget = fmt.Sprintf("budget %g", p.RetryBudget)
	}
	fmt.Fprintf(w, "retries: gateway and order retry a failed or timed-out call %d times, backoff from %v (full jitter,\n",
		p.Retries, p.RetryBackoff)
	fmt.Fprintf(w, "  doubling, at most 1s), %s; the client never retries\n", budget)
	fmt.Fprintf(w, "fault %v-%v in front of inventory: %s of the calls refused at once with an error, %s delayed %v; seed %d\n",
		p.FaultStart, p.FaultEnd, pct(p.Errors), pct(p.Slow), p.Delay, p.Seed)
	fmt.Fprintf(w, "without breakers: the groups' breakers forced closed, no fallback\n")
	fallback := "a failed or refused call answers degraded at once"
	if !p.Fallback {
		fallback = "no fallback"
	}
	fmt.Fprintf(w, "with breakers: group and command breakers, window %v in %d buckets, min %d requests, failure ratio %g,\n",
		p.Window, p.Buckets, p.MinRequests, p.FailureRatio)
	fmt.Fprintf(w, "  open %v%s, %d probe(s), %d successes to close; %s\n",
		p.Open, p.backoffText(), p.Probes, p.ProbeSuccesses, fallback)
	if p.HealthCheck > 0 {
		fmt.Fprintf(w, "  health check every %v while open\n", p.HealthCheck)
	}
	fmt.Fprintln(w)

	wo, wi := r.Without, r.With
	f1 := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	kept := func(during, before float64) string { return pct(during / before) }
	times := func(before, during float64) string {
		if during == 0 {
			return "inf"
		}
		return strconv.FormatFloat(before/during, 'f', 1, 64) + "x"
	}
	sourceWith := f1(sourceRate*(1-sourceWithLoss)) + "*"
	sourceWithout := f1(sourceWithoutDuring) + "+"
	row := func(name string, cols ...string) {
		fmt.Fprintf(w, "%-46s %10s %12s %10s %12s\n", name, cols[0], cols[1], cols[2], cols[3])
	}
	fmt.Fprintf(w, "%-46s %23s %23s\n", "", "without breakers", "with breakers")
	row("", "source", "model", "source", "model")
	row("entry ok answers/s, before the fault", f1(sourceRate), f1(wo.OKBefore), f1(sourceRate), f1(wi.OKBefore))
	row("entry ok answers/s in the fault: mean", sourceWithout, f1(wo.OKDuring), "-", f1(wi.OKDuring))
	row("  of them for history (never calls inventory)", "-", f1(wo.HistoryOKDuring), "-", f1(wi.HistoryOKDuring))
	row("  lowest second", sourceWithout, strconv.Itoa(wo.OKLowest), "-", strconv.Itoa(wi.OKLowest))
	row("entry ok or degraded answers/s: mean", "-", f1(wo.OKDuring+wo.DegradedDuring), sourceWith,
		f1(wi.OKDuring+wi.DegradedDuring))
	row("  lowest second", "-", strconv.Itoa(wo.AnsweredLowest), sourceWith, strconv.Itoa(wi.AnsweredLowest))
	row("kept of before (means): ok", pct(sourceWithoutDuring/sourceRate)+"+", kept(wo.OKDuring, wo.OKBefore),
		"-", kept(wi.OKDuring, wi.OKBefore))
	row("  ok or degraded", "-", kept(wo.OKDuring+wo.DegradedDuring, wo.OKBefore),
		pct(1-sourceWithLoss)+"*", kept(wi.OKDuring+wi.DegradedDuring, wi.OKBefore))
	row("entry drop, before / during (ok, means)", times(sourceRate, sourceWithoutDuring)+"+",
		times(wo.OKBefore, wo.OKDuring), "-", times(wi.OKBefore, wi.OKDuring))
	for h := range hops {
		source := "-"
		if h == hopOrder || h == hopGateway {
			source = "saturated"
		}
		busy := func(hp Hop) string { return fmt.Sprintf("%.0f / %s", hp.MeanBusy, pct(hp.Full)) }
		row(hopNames[h]+": threads busy, mean / time all busy", source, busy(wo.Hops[h]), "-", busy(wi.Hops[h]))
	}
	for h := hopOrder; h < hops; h++ {
		amp := func(hp Hop) string { return strconv.FormatFloat(hp.Amplification, 'f', 2, 64) }
		row("calls reaching "+hopNames[h]+" per entry request", "-", amp(wo.Hops[h]), "-", amp(wi.Hops[h]))
	}
	for h := hopOrder; h < hops; h++ {
		per := func(hp Hop) string { return strconv.FormatFloat(hp.PerCall, 'f', 2, 64) }
		row(fmt.Sprintf("attempts per call, %s -> %s", hopNames[h-1], hopNames[h]), "-", per(wo.Hops[h]), "-", per(wi.Hops[h]))
	}
	fmt.Fprintf(w, "+ the source: the entry \"fell from %g to %g\" (its \"%gx amplification\"), not whether %g is a mean or\n",
		sourceRate, sourceWithoutDuring, sourceAmplification, sourceWithoutDuring)
	fmt.Fprintf(w, "  the level it fell to; \"saturated\": order's %d threads held by inventory, the gateway's by order\n",
		sourceOrderThreads)
	fmt.Fprintf(w, "* the source: the entry lost %s with breakers, not whether degraded answers count\n\n", pct(sourceWithLoss))

	row2 := func(name string, a, b any) { fmt.Fprintf(w, "%-46s %23v %23v\n", name, a, b) }
	row2("model only", "without breakers", "with breakers")
	row2("entry degraded answers/s in the fault: mean", f1(wo.DegradedDuring), f1(wi.DegradedDuring))
	row2("entry ok answers/s after the fault: mean", f1(wo.OKAfter), f1(wi.OKAfter))
	recovered := func(r Recovery) string {
		if !r.Recovered {
			return "not in the run"
		}
		return r.After.String()
	}
	row2("recovery after the fault (1 s buckets)", recovered(wo.Recovery), recovered(wi.Recovery))
	for h := range hops {
		refused := func(hp Hop) string { return fmt.Sprintf("%d / %d", hp.Refused, hp.PeakQueue) }
		row2(hopNames[h]+": refused in the fault / peak queue", refused(wo.Hops[h]), refused(wi.Hops[h]))
	}
	row2("calls the fault refused / delayed", fmt.Sprintf("%d / %d", wo.FaultErrors, wo.FaultDelayed),
		fmt.Sprintf("%d / %d", wi.FaultErrors, wi.FaultDelayed))
	for _, b := range wi.Breakers {
		row2("breaker "+b.Name+", not closed", "-",
			fmt.Sprintf("%v (%d transitions)", b.NotClosed.Round(time.Millisecond), len(b.Transitions)))
	}
	if p.HealthCheck > 0 {
		row2("health checks run", "-", wi.HealthChecks)
	}
	printChainTransitions(w, wi.Breakers)
	_, err := fmt.Fprintln(w)
	return err
}

// printChainTransitions prints the transitions of each breaker that made
// any, or that it made the same ones as the breaker before it (a group's
// breaker and its command's see the same calls when the group has one
// command, or one endpoint fails).
func printChainTransitions(w io.Writer, bs []BreakerRun) {
	fmt.Fprintln(w, "\ntransitions (with breakers, virtual time):")
	for i, b := range bs {
		switch {
		case len(b.Transitions) == 0:
			continue
		case i > 0 && slices.Equal(b.Transitions, bs[i-1].Transitions):
			fmt.Fprintf(w, "  %s: the same as %s\n", b.Name, bs[i-1].Name)
			continue
		}
		fmt.Fprintf(w, "  %s:\n", b.Name)
		for _, t := range b.Transitions {
			open := ""
			if t.To == circuit.Open.String() {
				open = fmt.Sprintf(" (open %v)", t.OpenFor)
			}
			fmt.Fprintf(w, "    %9.3f s  %-9s -> %-9s  %s%s\n", t.AtMS/1000, t.From, t.To, t.Reason, open)
		}
	}
}

// pct formats a share as a percentage, to a tenth.
func pct(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + "%" }
