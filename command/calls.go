package command

import "github.com/bulwark-go/bulwark/metrics"

// Calls returns the number of callers' calls counted in c: the sum of its
// primary outcomes, the one outcome each attempt has (SUCCESS, FAILURE,
// TIMEOUT, BAD_REQUEST, SHORT_CIRCUITED, the rejections, CANCELLED,
// QUEUE_TIMEOUT, RATE_LIMITED), less its RETRIED and HEDGED attempts: a
// call retried twice made three attempts and counts once (see package retry),
// and so does a call that made two hedges (see package hedge). An attempt and
// its RETRIED or HEDGED are recorded together, so a window never holds
// more of them than attempts. Given a snapshot's Cumulative counts it is the
// number of calls since the command was created, a counter that never
// decreases (what an exporter such as the prom module publishes as
// calls_total).
func Calls(c metrics.Counts) int64 { return primaryCount(c) - c[metrics.Retried] - c[metrics.Hedged] }
