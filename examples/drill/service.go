package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/fallback"
	"github.com/bulwark-go/bulwark/faultinject"
	"github.com/bulwark-go/bulwark/metrics"
)

// The service under drill. Every route gets the same protection.
const (
	callTimeout   = 250 * time.Millisecond // per backend call
	serviceTime   = 2 * time.Millisecond   // the backend's work per call
	frontConns    = 20                     // the front's shared connection pool (MaxConnsPerHost)
	bulkheadSize  = 10                     // per route: the group's pool
	faultyRoute   = "inventory"            // the route whose dependency the drill makes sick
	healthyRoute  = "catalog"
	breakerWindow = time.Second
	settle        = 300 * time.Millisecond // load before the warm phase, counted in no phase
)

// routes are the front's endpoints, each calling the backend route of the
// same name; the faulty one is last.
var routes = []string{healthyRoute, faultyRoute}

// commandOf names the command of each route's group.
var commandOf = map[string]string{healthyRoute: "GetItem", faultyRoute: "GetStock"}

// preset is a fault a drill injects.
type preset struct {
	what string // what it does, for the report
	cfg  faultinject.Config
}

// presets are the drills -fault can name.
var presets = map[string]preset{
	"errors": {"40% of calls answered 503, 30% hang until the call's timeout",
		faultinject.Config{Seed: 1, ServerErrorShare: 0.4, HangShare: 0.3}},
	"dns": {"every lookup of the dependency's name fails (no such host)",
		faultinject.Config{DNSShare: 1, DNS: faultinject.DNSNotFound}},
	"pool": {fmt.Sprintf("all %d connections of the client's pool are held: calls wait until their timeout", frontConns),
		faultinject.Config{PoolSize: frontConns, PoolHeld: frontConns}},
}

func presetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// protection is the configuration of every route's group: a pool with no
// queue, the call timeout, and group and command breakers alike.
func protection() command.GroupConfig {
	window := metrics.Window{Length: breakerWindow, Buckets: 10}
	breaker := circuit.Config{Window: window, MinRequests: 20, FailureRatio: 0.5,
		OpenDuration: time.Second, HalfOpenSuccesses: 3}
	return command.GroupConfig{Strategy: command.Thread, MaxConcurrent: bulkheadSize, Timeout: callTimeout,
		Window: window, Breaker: breaker, CommandBreaker: breaker}
}

// drill runs the drill of the preset name against a fresh service, with
// the script and load of p, and returns its report. The registry's clock
// is the recorder's, the load generator's pacedClock, so the breakers'
// transitions and the calls are stamped on one clock, which keeps to the
// generator's schedule.
func drill(name string, p params) (report, error) {
	pre := presets[name]
	clock := newPacedClock(metrics.SystemClock())
	rec := new(recorder)

	backend, err := listen(backendHandler(rec))
	if err != nil {
		return report{}, err
	}
	defer backend.close()

	faults, err := faultinject.New(pre.cfg)
	if err != nil {
		return report{}, err
	}
	pool := &http.Transport{MaxConnsPerHost: frontConns, MaxIdleConnsPerHost: frontConns, IdleConnTimeout: 30 * time.Second}
	defer pool.CloseIdleConnections()
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = reg.Close(ctx)
	}()
	var endpoints []endpoint
	for _, route := range routes {
		client := &http.Client{Transport: pool}
		if route == faultyRoute {
			client.Transport = faultinject.NewTransport(pool, faults)
		}
		g, err := reg.NewGroup(route, protection())
		if err != nil {
			return report{}, err
		}
		endpoints = append(endpoints, endpoint{route: route, group: g,
			cmd: &backendCmd{name: commandOf[route], client: client, url: backend.url + "/" + route}})
	}
	front, err := listen(frontHandler(endpoints))
	if err != nil {
		return report{}, err
	}
	defer front.close()

	// One call per route creates its command breaker; then every breaker
	// is watched.
	load := newLoad(clock, front.url, p.Rate, rec)
	defer load.close()
	for _, route := range routes {
		if err := load.prime(route); err != nil {
			return report{}, err
		}
	}
	for _, e := range endpoints {
		cb, _ := e.group.CommandBreaker(e.cmd.name)
		for _, b := range []*circuit.Breaker{e.group.Breaker(), cb} {
			defer rec.watch(e.route, b)()
		}
	}

	// The script, after a settling load that no phase counts: the warm
	// baseline does not include the pools' first connections. The load
	// generator takes its steps in turn with its requests.
	done := load.start(settle+p.Warm+p.Hold+p.Observe, []action{
		{at: settle, do: func(at time.Duration) { rec.mark(markStart, at) }},
		{at: settle + p.Warm, do: func(at time.Duration) { rec.mark(markInject, at); faults.Enable() }},
		{at: settle + p.Warm + p.Hold, do: func(at time.Duration) { rec.mark(markRemove, at); faults.Disable() }},
	})
	<-done
	rec.mark(markEnd, clock.Now())

	return buildReport(rec.snapshot(), drillSpec{Fault: name, What: pre.what, Faulty: faultyRoute, Routes: routes, Rate: p.Rate}), nil
}

// server is a loopback HTTP server.
type server struct {
	srv *http.Server
	url string
}

func listen(h http.Handler) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &server{srv: srv, url: "http://" + ln.Addr().String()}, nil
}

func (s *server) close() { _ = s.srv.Close() }

// backendHandler is the dependency: every route answers "ok" after
// serviceTime, and each arrival is recorded under its call's hdrStart (a
// request without one, which the drill never sends, is refused).
func backendHandler(rec *recorder) http.Handler {
	mux := http.NewServeMux()
	for _, route := range routes {
		mux.HandleFunc("/"+route, func(w http.ResponseWriter, r *http.Request) {
			at, err := strconv.ParseInt(r.Header.Get(hdrStart), 10, 64)
			if err != nil {
				http.Error(w, "no "+hdrStart+": "+err.Error(), http.StatusBadRequest)
				return
			}
			rec.arrival(route, time.Duration(at))
			t := time.NewTimer(serviceTime)
			defer t.Stop()
			select {
			case <-t.C:
				_, _ = io.WriteString(w, "ok")
			case <-r.Context().Done():
			}
		})
	}
	return mux
}

// backendCmd calls one backend route; the embedded Static answers the
// fallback (the zero struct: "served from the fallback").
type backendCmd struct {
	fallback.Static[struct{}]
	name   string
	client *http.Client
	url    string
}

func (c *backendCmd) Name() string { return c.name }

func (c *backendCmd) Run(ctx context.Context) (struct{}, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return struct{}{}, err
	}
	if at, ok := ctx.Value(startKey{}).(string); ok {
		req.Header.Set(hdrStart, at)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return struct{}{}, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return struct{}{}, fmt.Errorf("%s: status %d", c.url, resp.StatusCode)
	}
	return struct{}{}, nil
}

// endpoint is one route of the front: its group and command.
type endpoint struct {
	route string
	group *command.Group
	cmd   *backendCmd
}

// Headers by which the front tells the load generator how a call went.
const (
	hdrOutcome  = "X-Drill-Outcome"  // ok | fallback | error
	hdrEvent    = "X-Drill-Event"    // the call's primary event (SUCCESS, SHORT_CIRCUITED, ...)
	hdrFallback = "X-Drill-Fallback" // its fallback event, if a fallback was considered
)

// hdrStart carries a call's scheduled instant on the drill's clock, in
// nanoseconds, from the load generator to the front and from the front's
// command to the backend, which files the request's arrival under it.
const hdrStart = "X-Drill-Start"

// startKey is the context key under which the front hands a request's
// hdrStart to its command's Run.
type startKey struct{}

// frontHandler is the service under drill: each endpoint runs its
// route's command and answers 200 with the backend's answer or the
// fallback, or 502 when the call failed without one.
func frontHandler(endpoints []endpoint) http.Handler {
	mux := http.NewServeMux()
	for _, e := range endpoints {
		mux.HandleFunc("/"+e.route, func(w http.ResponseWriter, r *http.Request) {
			ctx := context.WithValue(r.Context(), startKey{}, r.Header.Get(hdrStart))
			_, info, err := command.ExecuteInfo[struct{}](ctx, e.group, e.cmd)
			h := w.Header()
			h.Set(hdrEvent, info.Event.String())
			h.Set(hdrFallback, fallbackEvent(info.Events))
			switch {
			case err != nil:
				h.Set(hdrOutcome, outcomeError)
				w.WriteHeader(http.StatusBadGateway)
			case info.Degraded:
				h.Set(hdrOutcome, outcomeFallback)
				_, _ = io.WriteString(w, "fallback")
			default:
				h.Set(hdrOutcome, outcomeOK)
				_, _ = io.WriteString(w, "ok")
			}
		})
	}
	return mux
}

// fallbackEvents are the events of a fallback that was considered.
var fallbackEvents = []metrics.Event{metrics.FallbackSuccess, metrics.FallbackFailure, metrics.FallbackRejection, metrics.FallbackMissing}

// fallbackEvent returns the name of the fallback event in es, or "".
func fallbackEvent(es metrics.EventSet) string {
	for _, e := range fallbackEvents {
		if es.Has(e) {
			return e.String()
		}
	}
	return ""
}
