// Package prom exports a bulwark command.Registry to Prometheus: New returns
// a prometheus.Collector that reads the registry's snapshot at scrape time,
// so nothing is added to the call path. It lives in its own module so that
// applications that do not use Prometheus never pull in client_golang.
//
//	c, err := prom.New(reg) // reg is the *command.Registry; prom.New(reg, prom.WithDetail()) for every series
//	if err != nil { ... }
//	pr := prometheus.NewRegistry()
//	pr.MustRegister(c)
//	mux.Handle("/metrics", promhttp.HandlerFor(pr, promhttp.HandlerOpts{}))
//
// # Metrics
//
// Labels: group and command (names the application chose: keep them few),
// event (an event's label, metrics.Event.Label: bulwark's event names in
// lower case, such as "short_circuited", "rate_limited" or "retried"; the
// table of docs/events.md lists them all), state ("closed", "open",
// "half-open"), mode ("normal", "forced-open", "forced-closed",
// "observe-only") and tier (the names of the group's alert.Config.Tiers).
//
//	bulwark_command_events_total{group,command,event}   counter: every event kind bulwark counts
//	bulwark_command_calls_total{group,command}          counter: callers' calls (attempts less event="retried")
//	bulwark_command_in_flight{group,command}            gauge: calls executing now
//	bulwark_command_detached{group,command}             gauge: timed-out calls whose Run still runs
//	bulwark_command_degraded_ratio{group,command}       gauge: share of the window's calls served by a fallback
//	bulwark_command_latency_seconds{group,command,phase}                  histogram, see Latency below
//	bulwark_command_latency_window_seconds{group,command,phase,quantile}  summary, see Latency below
//	bulwark_command_latency_window_mean_seconds{group,command,phase}      gauge
//	bulwark_command_circuit_state{group,command,state}  gauge: 1 for the breaker's state, 0 for the others
//	bulwark_command_circuit_state_seconds{group,command} gauge: time in the current state
//	bulwark_group_circuit_state{group,state}            gauge: the group-level breaker, as above
//	bulwark_group_circuit_state_seconds{group}          gauge
//	bulwark_command_circuit_mode{group,command,mode}    gauge: 1 for the breaker's mode, 0 for the others
//	bulwark_group_circuit_mode{group,mode}              gauge: the group-level breaker, as above
//	bulwark_breaker_transitions_total{group,command,from,to,reason}  counter: transitions since created, one series per kind seen; command="" for the group's breaker
//	bulwark_command_circuit_error_bound{group,command}  gauge: failure ratio's lower bound at Config.Confidence; none when off
//	bulwark_group_circuit_error_bound{group}            gauge: the group-level breaker, as above
//	bulwark_command_alert_tier{group,command,tier}      gauge: 1 for the alert tier reached; no series when none
//	bulwark_group_alert_tier{group,tier}                gauge: the group-level breaker, as above
//	bulwark_command_degraded_alarm{group,command}       gauge: 1 while the degraded alarm is raised, else 0
//	bulwark_group_config_generation{group}              gauge: accepted Reconfigure calls
//	bulwark_group_throttle_probability{group}           gauge: share the client-side throttle refuses now; none when off
//	bulwark_group_adaptive_limit{group}                 gauge: the adaptive concurrency limit in force; none when off
//	bulwark_bulkhead_active{group}                      gauge: slots or permits taken
//	bulwark_bulkhead_queued{group}                      gauge: calls waiting for a worker
//	bulwark_bulkhead_capacity{group}                    gauge: pool size or semaphore limit
//	bulwark_bulkhead_queue_capacity{group}              gauge: queue size (0 for a semaphore)
//	bulwark_bulkhead_detached{group}                    gauge: work running whose caller left
//	bulwark_bulkhead_rejected_total{group}              counter: calls refused because it was full
//	bulwark_bulkhead_completed_total{group}             counter: work that returned
//	bulwark_group_renamed_commands{group}               gauge: commands named by a renamed form (see below)
//	bulwark_collector_dropped_series_total              counter: series left out of scrapes (see below)
//
// # Series per command
//
// By default a command has the series an operator reads first, at most 15
// for a command that failed, tripped and was short-circuited (11 for one
// that only succeeded): events_total for the kinds that have happened
// (a kind appears when it first counts; Prometheus's rate and increase
// miss the increments of a series' first scrape, so WithDetail exports
// every kind from zero), calls_total, in_flight, degraded_alarm,
// circuit_state (three series; and circuit_error_bound with the confidence rule on), the window summary of phase "total" at
// quantiles 0.5 and 0.99 with its _count and _sum, alert_tier while a tier
// is reached and breaker_transitions_total for the kinds seen. WithDetail
// adds the rest of the list above: every event kind, detached,
// degraded_ratio, the cumulative latency histograms (the ones that sum
// across instances), phase "run", every quantile and the window mean,
// circuit_state_seconds and circuit_mode. Group and bulkhead series are
// the same in both (a few per group).
//
// Every name the labels carry is valid UTF-8 and at most
// command.MaxNameLength bytes: the registry renames a command name that
// is not (once, when first seen; its own renamed form keeps it apart from
// every other name) and counts it in bulwark_group_renamed_commands. A
// series the collector still cannot build (a label value that is not
// valid UTF-8, from a Source other than a registry) is left out of the
// scrape and counted in bulwark_collector_dropped_series_total: one bad
// name never fails a scrape. A Source must give each group and each
// command of a group once, as a registry does.
//
// The events counter has one series per event kind of package metrics
// (metrics.NumEvents of them), found by iterating over the kinds: an event
// kind added to bulwark appears here without a change to this package. The
// counters are bulwark's cumulative counts (metrics.Snapshot.Cumulative),
// which never decrease while the group lives; a group closed and created
// again starts from zero, which Prometheus's rate() reads as a counter
// reset. The degraded ratio over any range, fleet-wide, is better computed
// from the counters:
//
//	sum by (group, command) (rate(bulwark_command_events_total{event="fallback_success"}[5m]))
//	  / sum by (group, command) (rate(bulwark_command_calls_total[5m]))
//
// Alert tiers and the degraded alarm are the group's alerts (package alert)
// as the snapshot shows them: zero values while alerts are off. A change of
// bulwark_group_config_generation marks a Reconfigure (live rules).
//
// Deferred-write queues (module durable) are exported by a second
// collector, NewQueues, fed by a function: this module does not require
// the queue's module. See QueueCollector for its metrics and the glue.
//
// # Latency
//
// phase "run" is Run alone; phase "total" is what the caller waited,
// queue and fallback included. Two views:
//
// bulwark_command_latency_seconds (WithDetail) is a cumulative histogram since the
// command was created (metrics.Rolling.CumulativeLatency), with buckets at
// 1, 2.5, 5, 10, 25, 50, 100, 250 and 500 ms, 1, 2.5, 5 and 10 s. bulwark
// keeps latencies in log-linear bins at most 1/32 of their lower bound
// wide, so a latency within 1.6% of a bucket bound may be counted on the
// wrong side of it; the count and the sum are exact. It sums across
// instances, so it is the one for fleet-wide quantiles:
//
//	histogram_quantile(0.99, sum by (group, command, le) (rate(bulwark_command_latency_seconds_bucket{phase="total"}[5m])))
//
// bulwark_command_latency_window_seconds is a summary: its quantiles are
// the ones bulwark itself computes over the command's rolling window (10 s
// by default) at the time of the scrape, at quantile 0, 0.25, 0.5, 0.75,
// 0.9, 0.95, 0.99, 0.995 and 1, accurate to 1.6%, with the window's mean
// in bulwark_command_latency_window_mean_seconds: the figures bulwark's
// own dashboard shows. As the quantiles of client_golang's Summary cover
// its recent observations only, these cover the window only; its _count
// and _sum are counters, the histogram's (every call since the command was
// created). A window without calls exports no quantile (and no mean), and
// the quantiles cannot be averaged or summed across instances (use max by
// (group, command)).
//
// # Alerts and dashboards
//
// The module ships files to start from, each checked by its tests against
// the real tools: alerts.yml (Prometheus alerting rules: a breaker not
// closed for 1, 10 and 30 minutes as severities P3, P2 and P1, like
// command.DefaultAlertTiers; a breaker tripping three times in 10 minutes,
// from bulwark_breaker_transitions_total; more than 5% of calls degraded),
// with its unit tests alerts_test.yml (promtool test rules);
// alertmanager.yml (P3 recorded, P2 paged, P1 escalated, lower tiers of an
// alert inhibited while a higher one fires; run by a real Alertmanager in
// the tests); and grafana/bulwark.json (a Grafana dashboard whose every
// query finds series in a live scrape by a real Prometheus).
package prom
