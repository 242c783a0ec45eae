// Package alert raises a group's alerts: tiers by how long a breaker (the
// group's or a command's) has been out of the closed state, and an alarm on
// each command's degraded rate. Alerts are values handed to
// Config.OnAlert and logged; paging is up to OnAlert.
//
// A Watcher reads the snapshots of the groups it watches (Group.Snapshot)
// every Config.Interval, on one goroutine for all of them, skipping the
// quiet ones (command.Group.Quiet: nothing in their windows, every breaker
// closed, no alert pending), so that an idle group costs a few reads; the
// only thing it takes from the call path is the error of each failed call,
// through the hook GroupConfig.Alerts sets, to quote the errors behind an alert.
// Turn it on by setting the Watcher as a group's GroupConfig.Alerts:
//
//	w, err := alert.New(alert.Config{OnAlert: page})
//	g, err := reg.NewGroup("payments", command.GroupConfig{Alerts: w})
//
// Its goroutine runs while it watches at least one group: it starts with
// the first group's NewGroup and stops with the last one's Close.
//
// Each alert says what to do (Alert.Action: the dependency, how long its
// breaker has been open and why) and quotes the last errors, each with
// the request ID that Config.RequestID reads from the failed call's ctx.
// A Webhook sends the alerts to an Alertmanager (API v2), the tier as the
// severity label that prom/alertmanager.yml routes:
//
//	hook, err := alert.NewWebhook(alert.WebhookConfig{URL: "http://alertmanager:9093/api/v2/alerts"})
//	w, err := alert.New(alert.Config{OnAlert: hook.OnAlert, RequestID: requestID})
//
// A breaker in observe-only mode alerts as in normal mode (it shows what
// would have been refused); one forced open by SetMode is an operator's
// decision, not an outage: it fires no tier and ends the outage in
// progress.
package alert
