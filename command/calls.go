package command

import "github.com/bulwark-go/bulwark/metrics"

// Calls returns the number of calls counted in c: the sum of its primary
// outcomes, the one outcome each call has (SUCCESS, FAILURE, TIMEOUT,
// BAD_REQUEST, SHORT_CIRCUITED, the rejections, CANCELLED, QUEUE_TIMEOUT).
// Given a snapshot's Cumulative counts it is the number of calls since the
// command was created, a counter that never decreases (what an exporter
// such as the prom module publishes as calls_total).
func Calls(c metrics.Counts) int64 { return primaryCount(c) }
