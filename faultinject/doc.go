// Package faultinject injects faults on purpose, for drills: a command's
// Run (Command) and an http.RoundTripper (NewTransport) fail, hang, slow
// down, reset the connection, fail the name lookup, wait for a connection
// of an exhausted pool or trickle the response body for a chosen share of
// calls, so that a team can check in staging that the breakers open,
// half-open recovers and the degraded answers come back as promised.
// examples/drill runs such a drill against a loopback service and prints
// its report (docs/drills.md).
//
// Nothing is ever injected unless the program wraps a command or a
// transport around a *Faults, and a new Faults is disabled: Enable starts
// a drill, Disable stops it and Set changes what it injects (shares,
// latency, status code), at runtime, without a restart. Each change applies
// from the next call on; a call already delayed or hanging keeps its fault.
// A nil *Faults injects nothing, so the wrappers can stay in place with no
// drill configured.
//
// What a call gets is drawn from a random source seeded by Config.Seed:
// the same seed and the same sequence of calls give the same faults (under
// concurrency, the same draws shared out in scheduling order). A share is a
// probability in [0, 1]: hang, error, reset, EOF, server error and DNS
// failure are exclusive (their shares add up to at most 1); latency and
// the slow body are drawn apart and combine with them. Latency is fixed,
// uniform or exponential with a cap (Fixed, Uniform, Exponential). Delays
// and hangs honour the context: they end with ctx.Err() when it ends.
// Injected errors match ErrInjected; a reset also matches
// syscall.ECONNRESET, an EOF io.ErrUnexpectedEOF. Bad settings are an
// error wrapping ErrInvalidConfig, naming the field and its value.
//
// Two faults imitate the real thing exactly, so that the code under drill
// takes the path it would take in an incident. A DNS failure (DNSShare) is
// the error net/http's Transport returns when a lookup fails: a
// *net.OpError around a *net.DNSError with the same text, IsNotFound or
// IsTemporary, Timeout and Temporary (a resolver that does not answer at
// all is not among them: net/http's dial outlives the request, so the
// caller sees its own context end, as with HangShare). An exhausted pool
// (PoolSize, PoolHeld) makes requests wait for a connection, in order,
// until one is freed or their context ends, which ends them with the
// context's error, as an http.Transport whose MaxConnsPerHost connections
// are all in use does.
//
// # A staging drill
//
// Build the wrappers at startup, inside the protection you want to drill
// (faults injected below httpguard count as the host's failures), and
// switch them from an admin endpoint:
//
//	faults, err := faultinject.New(faultinject.Config{
//		Seed:             1,
//		ErrorShare:       0.4, // 40% of calls fail
//		LatencyShare:     0.2, // 20% are delayed by 1 to 2 s
//		Latency:          faultinject.Uniform(time.Second, 2*time.Second),
//		ServerErrorShare: 0.1, // HTTP only: 10% get a 503
//	})
//	if err != nil {
//		return err
//	}
//	// Commands: the profile lookup goes through the faults.
//	profile, err := command.Execute(ctx, profiles, faultinject.Command(getProfile{id}, faults))
//	// HTTP: the payment client's requests go through them too.
//	guard, err := httpguard.NewTransport(reg, httpguard.Config{Base: faultinject.NewTransport(nil, faults)})
//	client := &http.Client{Transport: guard}
//
//	// On a loopback admin listener, behind your own authentication:
//	admin.HandleFunc("POST /drill/start", func(http.ResponseWriter, *http.Request) { faults.Enable() })
//	admin.HandleFunc("POST /drill/stop", func(http.ResponseWriter, *http.Request) { faults.Disable() })
//
// During the drill, check on the dashboard (or with Group.CommandBreaker)
// that the breakers open (SHORT_CIRCUITED, FALLBACK_SUCCESS, degraded
// rate), that the healthy dependencies are untouched, and what callers see;
// after the stop, that half-open probes succeed and the breakers close.
// Example_drill runs such a drill on a manual clock.
package faultinject
