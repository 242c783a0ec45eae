// Package httpguard protects HTTP clients and servers. Transport is an
// http.RoundTripper that runs each request as a bulwark command in a group
// per host, so that a failing host is short-circuited, bounded by its own
// bulkhead and timeout, and kept apart from the healthy ones. Server's
// Middleware protects a service's own handlers: a bulkhead per route, a
// rate limit per caller, priority shedding, answered 429 or 503 with
// Retry-After (see Server and docs/inbound.md).
//
//	reg := command.NewRegistry(command.RegistryConfig{})
//	defer reg.Close(ctx)
//	t, err := httpguard.NewTransport(reg, httpguard.Config{Degrade: true})
//	client := &http.Client{Transport: t}
//
// A host's group is the registry's group named by GroupName ("host:port"),
// created on the host's first request; it shows in the registry's
// snapshots, stream and go-metrics like any other group. Responses keep the
// http.RoundTripper contract: a response that arrived is returned with a
// nil error, even a 5xx, which the breakers count as a failure (the caller
// still reads its body and Retry-After). 4xx responses are bad requests:
// returned, not counted against the host. Requests that got no response
// (network errors, timeouts, short-circuits, rejections) get an error, or
// with Config.Degrade a synthetic 503 with Retry-After and X-Degraded when
// the Transport refused them itself.
//
// Host names are normalised (case, trailing dot, default port), and
// Config.MaxHosts bounds how many groups a Transport creates, so that
// requests to hosts taken from user input cannot exhaust memory and
// goroutines.
//
// A request that is a half-open probe of its host's breakers is sent with
// the header X-Breaker-Probe: 1 (ProbeHeader), on a copy of the request, so
// that the host's logs count probes apart. ProbeReachable, set as the
// group's ProbeClassifier, lets any response, even a 5xx, prove the host
// reachable during half-open.
package httpguard
