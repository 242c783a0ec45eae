// Command gateway is an HTTP gateway in one program, with traffic shaping
// on both sides. In front, a token bucket per client (ratelimit.PerKey,
// keyed by the X-Client header) answers a client over its quota with 429
// and Retry-After. Behind, the gateway forwards GETs to a flaky local
// backend through an httpguard.Transport: a breaker per host that answers a
// degraded 503 with Retry-After while open, and retries of the idempotent
// GETs (3 attempts, backoff with jitter) under the group's retry budget, so
// that the backend never sees much more than 1.2 times the load however
// badly it fails. The backend fails a share of its requests at random, and
// every one of them during an outage in the middle of the run. Clients
// send GETs in a loop and honour Retry-After: after a 429 or a 503 they
// wait as told. Client 0 is greedy: it sends four times as often as the
// others, more than its quota allows, and so meets the 429s. At the end it prints a summary: what the clients got, how
// many requests reached the backend per forwarded request (the load
// multiplier), and the breaker's transitions.
//
//	go run ./examples/gateway
//	go run ./examples/gateway -duration 10s -clients 8 -quota 20 -fail 0.3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/httpguard"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/ratelimit"
)

func main() {
	p := defaultParams()
	flag.DurationVar(&p.Duration, "duration", p.Duration, "how long the clients send requests")
	flag.IntVar(&p.Clients, "clients", p.Clients, "number of clients")
	flag.DurationVar(&p.Pace, "pace", p.Pace, "pause between two requests of a client (a quarter of it for the greedy client 0)")
	flag.Float64Var(&p.Quota, "quota", p.Quota, "requests per second allowed per client")
	flag.IntVar(&p.Burst, "burst", p.Burst, "burst allowed per client")
	flag.Float64Var(&p.Fail, "fail", p.Fail, "share of requests the backend fails outside its outage")
	flag.Parse()
	if err := run(os.Stdout, p); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// params sets the demo's scale.
type params struct {
	Duration time.Duration // the clients' run; the outage is its middle third
	Clients  int
	Pace     time.Duration // a client's pause between requests; client 0 pauses a quarter of it
	Quota    float64       // per client, requests per second
	Burst    int
	Fail     float64 // share of the backend's random failures
}

func defaultParams() params {
	return params{Duration: 5 * time.Second, Clients: 4, Pace: 30 * time.Millisecond, Quota: 40, Burst: 10, Fail: 0.1}
}

func (p params) validate() error {
	switch {
	case p.Duration <= 0:
		return fmt.Errorf("-duration %v must be positive", p.Duration)
	case p.Clients <= 0:
		return fmt.Errorf("-clients %d must be positive", p.Clients)
	case p.Pace < 0:
		return fmt.Errorf("-pace %v must not be negative", p.Pace)
	case p.Fail < 0 || p.Fail > 1:
		return fmt.Errorf("-fail %v must be between 0 and 1", p.Fail)
	}
	return nil // -quota and -burst are checked by the token buckets
}

// backend is the flaky dependency: it fails a share p.Fail of its GETs with
// 503, and all of them with 500 during its outage.
type backend struct {
	hits                 atomic.Int64
	fail                 float64
	outageFrom, outageTo time.Time
}

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.hits.Add(1)
	if now := time.Now(); now.After(b.outageFrom) && now.Before(b.outageTo) {
		http.Error(w, "outage", http.StatusInternalServerError)
		return
	}
	if rand.Float64() < b.fail {
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "42")
}

// gateway limits each client, then forwards its GET to the backend.
type gateway struct {
	limits    *ratelimit.PerKey
	client    *http.Client
	backend   string
	forwarded atomic.Int64
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := g.limits.AdmitKey(r.Context(), r.Header.Get("X-Client")); err != nil {
		var le *ratelimit.LimitError
		wait := time.Second
		if errors.As(err, &le) {
			wait = le.RetryAfter
		}
		w.Header().Set("Retry-After", seconds(wait))
		w.Header().Set("X-Degraded", "rate_limited")
		http.Error(w, "over your quota", http.StatusTooManyRequests)
		return
	}
	g.forwarded.Add(1)
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, g.backend+r.URL.Path, nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	resp, err := g.client.Do(req)
	if err != nil { // a network error or a timeout, after the retries
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for _, h := range []string{"Retry-After", "X-Degraded", "Content-Type"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// seconds formats d for Retry-After: whole seconds, rounded up, at least 1.
func seconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}

// tally is what the clients saw.
type tally struct {
	mu                              sync.Mutex
	requests, ok, limited, degraded int
	upstream5xx, errs               int
	waited                          time.Duration
}

// client sends GETs as client id until ctx ends, honouring Retry-After.
func client(ctx context.Context, id int, url string, pace time.Duration, t *tally) {
	hc := &http.Client{}
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/answer", nil)
		if err != nil {
			return
		}
		req.Header.Set("X-Client", "client-"+strconv.Itoa(id))
		resp, err := hc.Do(req)
		if ctx.Err() != nil {
			return // the run is over: this request does not count
		}
		wait := pace
		t.mu.Lock()
		t.requests++
		switch {
		case err != nil:
			t.errs++
		case resp.StatusCode == http.StatusOK:
			t.ok++
		case resp.StatusCode == http.StatusTooManyRequests:
			t.limited++
		case resp.Header.Get("X-Degraded") != "":
			t.degraded++
		default:
			t.upstream5xx++
		}
		if err == nil {
			if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
				wait = time.Duration(s) * time.Second
				t.waited += wait
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		t.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

func run(w io.Writer, p params) error {
	if err := p.validate(); err != nil {
		return err
	}
	quota := ratelimit.TokenBucketConfig{Rate: p.Quota, Burst: p.Burst}
	if err := quota.Validate(); err != nil {
		return fmt.Errorf("-quota %v, -burst %d: %w", p.Quota, p.Burst, err)
	}
	limits, err := ratelimit.NewPerKey(ratelimit.PerKeyConfig{MaxKeys: 1000, New: func(string) (ratelimit.Limiter, error) {
		return ratelimit.NewTokenBucket(quota)
	}})
	if err != nil {
		return err
	}

	start := time.Now()
	be := &backend{fail: p.Fail, outageFrom: start.Add(p.Duration / 3), outageTo: start.Add(2 * p.Duration / 3)}
	beSrv := httptest.NewServer(be)
	defer beSrv.Close()

	reg := command.NewRegistry(command.RegistryConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer reg.Close(context.Background())
	window := metrics.Window{Length: 2 * time.Second, Buckets: 10}
	breaker := circuit.Config{Window: window, MinRequests: 20, FailureRatio: 0.5, OpenDuration: 500 * time.Millisecond}
	base := &http.Transport{MaxIdleConnsPerHost: 64}
	defer base.CloseIdleConnections()
	transport, err := httpguard.NewTransport(reg, httpguard.Config{
		Base:    base,
		Degrade: true, // a short-circuit answers 503 with Retry-After
		Group: command.GroupConfig{
			Strategy: command.Semaphore, MaxConcurrent: 32, Timeout: 500 * time.Millisecond, Window: window,
			Breaker: breaker,
			// GETs are idempotent: up to 3 attempts, within the budget
			// (retries at most 20% of calls over the window, plus 1/s).
			Retry: retry.Config{MaxAttempts: 3, Backoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond},
		},
	})
	if err != nil {
		return err
	}
	gw := &gateway{limits: limits, client: &http.Client{Transport: transport}, backend: beSrv.URL}
	gwSrv := httptest.NewServer(gw)

	ctx, cancel := context.WithTimeout(context.Background(), p.Duration)
	defer cancel()
	var t tally
	var wg sync.WaitGroup
	for id := range p.Clients {
		pace := p.Pace
		if id == 0 {
			pace /= 4 // greedy
		}
		wg.Go(func() { client(ctx, id, gwSrv.URL, pace, &t) })
	}
	wg.Wait()
	gwSrv.Close() // waits for the requests in progress: the counts are final

	summary(w, p, &t, gw, be, reg)
	return nil
}

// summary prints what the clients got, the load on the backend and the
// breaker's story.
func summary(w io.Writer, p params, t *tally, gw *gateway, be *backend, reg *command.Registry) {
	fmt.Fprintf(w, "%d clients (one greedy) for %v, quota %v/s (burst %d) each; the backend fails %.0f%% of requests, all of them from %v to %v\n",
		p.Clients, p.Duration, p.Quota, p.Burst, 100*p.Fail, (p.Duration / 3).Round(time.Millisecond), (2 * p.Duration / 3).Round(time.Millisecond))
	fmt.Fprintf(w, "clients:  requests=%d ok=%d limited=%d degraded=%d upstream_5xx=%d errors=%d waited=%v (honouring Retry-After)\n",
		t.requests, t.ok, t.limited, t.degraded, t.upstream5xx, t.errs, t.waited)
	var retries, shorted int64
	for _, g := range reg.Snapshot().Groups {
		for _, c := range g.Commands {
			retries += c.Metrics.Cumulative[metrics.Retried]
			shorted += c.Metrics.Cumulative[metrics.ShortCircuited]
		}
		fmt.Fprintf(w, "breaker:  %s ends %v;", g.Name, g.Breaker.State)
		for _, tr := range g.Breaker.Transitions {
			fmt.Fprintf(w, " %v->%v (%s)", tr.From, tr.To, tr.Reason)
		}
		fmt.Fprintln(w)
	}
	forwarded, hits := gw.forwarded.Load(), be.hits.Load()
	load := 0.0
	if forwarded > 0 {
		load = float64(hits) / float64(forwarded)
	}
	fmt.Fprintf(w, "gateway:  forwarded=%d short_circuited=%d backend_hits=%d retries=%d load=%.2f (backend hits per forwarded request)\n",
		forwarded, shorted, hits, retries, load)
}
