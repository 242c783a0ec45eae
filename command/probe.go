package command

import (
	"context"
	"log/slog"

	"github.com/bulwark-go/bulwark/metrics"
)

// probeKey marks the context of a call that is a half-open probe.
type probeKey struct{}

// IsProbe reports whether ctx, the context Execute passed to Run, belongs to
// a half-open probe of the group's breaker or of the command's: the call
// whose result decides whether the breaker closes again. Run can tag such a
// request (package httpguard sets the header X-Breaker-Probe: 1) so that the
// dependency's logs count probes apart from user traffic: without the tag an
// operator reading the downstream's logs during an outage cannot tell the
// breaker's few test calls from a flood of real ones. Only a probe's context
// carries the mark, so a call on a closed breaker pays nothing for it.
func IsProbe(ctx context.Context) bool {
	probe, _ := ctx.Value(probeKey{}).(bool)
	return probe
}

// probeContext returns ctx marked as a probe's (see IsProbe).
func probeContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, probeKey{}, true)
}

// judgeProbe decides what the breakers record for an attempt that was a
// probe of at least one of them, whose outcome for a normal call would be
// o. A FAILURE is judged by the command's ProbeClassifier, if any, with
// Run's error; the other outcomes stand. Only the breaker that probed gets
// the judged outcome: the other (closed) one counts o, as for any call. It
// adds PROBE_SUCCESS or PROBE_FAILURE (none for a probe that does not
// count) to the attempt's events, beside the PROBE event admit added.
// record calls it.
func (k *call) judgeProbe(o metrics.Event) (gout, cout metrics.Event) {
	judged := o
	if classify := k.cs.probeClassifier; o == metrics.Failure && classify != nil {
		judged = k.c.classifyProbe(classify, k.r.err)
	}
	switch judged {
	case metrics.Success:
		k.events.Add(metrics.ProbeSuccess)
	case metrics.Failure, metrics.Timeout:
		k.events.Add(metrics.ProbeFailure)
	}
	gout, cout = o, o
	if k.gp.IsProbe() {
		gout = judged
	}
	if k.cp.IsProbe() {
		cout = judged
	}
	return gout, cout
}

// classifyProbe runs the ProbeClassifier classify on a failed probe's error. A panic
// in it, or an event that does not exist, leaves the probe a failure and is
// logged at Error level.
func (c *commandState) classifyProbe(classify func(error) metrics.Event, err error) (o metrics.Event) {
	o = metrics.Failure
	defer c.group.recoverHook("ProbeClassifier")
	judged := classify(err)
	if judged >= metrics.NumEvents {
		c.group.logger.Error("bulwark: ProbeClassifier returned an unknown event; the probe counts as a failure",
			slog.String("group", c.group.name), slog.String("command", c.name), slog.String("outcome", judged.String()))
		return o
	}
	return judged
}
