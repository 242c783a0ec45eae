// Command httpclient shows httpguard.Transport, the http.RoundTripper that
// runs each request as a command in a group per host. A local test server
// (a "price service") is healthy, answers 500 from 0.3 s to 1.2 s after the
// start, then recovers. The client asks it for a price every 30 ms and
// prints what it got: the 500s come back as responses (the caller reads the
// server's own answer) while the host's breaker counts them as failures,
// then the breaker opens and the transport answers at once with a degraded
// 503 carrying Retry-After (the breaker's remaining open time) and
// X-Degraded; after the open time, probes find the server healthy and the
// breaker closes. A 404 at the start passes through untouched and is not
// counted against the host. It takes about three seconds.
//
//	go run ./examples/httpclient
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/httpguard"
	"github.com/bulwark-go/bulwark/metrics"
)

func main() {
	if err := run(os.Stdout, defaultParams()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// params sets the pace of the demo.
type params struct {
	Requests     int
	Pace         time.Duration // pause between requests
	FailFrom     time.Duration // the server answers 500 from FailFrom to FailTo after the start
	FailTo       time.Duration
	OpenDuration time.Duration // how long the host's breaker stays open
}

func defaultParams() params {
	return params{Requests: 90, Pace: 30 * time.Millisecond, FailFrom: 300 * time.Millisecond,
		FailTo: 1200 * time.Millisecond, OpenDuration: 1500 * time.Millisecond}
}

// priceServer is the dependency: /price answers a price, or 500 while it is
// failing; anything else is a 404.
func priceServer(start time.Time, p params) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/price" {
			http.NotFound(w, r)
			return
		}
		if since := time.Since(start); since >= p.FailFrom && since < p.FailTo {
			http.Error(w, "database unavailable", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "101.50")
	}))
}

func run(w io.Writer, p params) error {
	start := time.Now()
	srv := priceServer(start, p)
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()

	reg := command.NewRegistry(command.RegistryConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer reg.Close(context.Background())
	// The host's group breaker and each method's command breaker: open at
	// half of at least 5 requests failed in the last 2 s.
	breaker := circuit.Config{
		Window:       metrics.Window{Length: 2 * time.Second, Buckets: 10},
		MinRequests:  5,
		OpenDuration: p.OpenDuration,
	}
	transport, err := httpguard.NewTransport(reg, httpguard.Config{
		Base:    base,
		Degrade: true,
		Group:   command.GroupConfig{Timeout: 200 * time.Millisecond, Breaker: breaker, CommandBreaker: breaker},
	})
	if err != nil {
		return err
	}
	client := &http.Client{Transport: transport}

	fmt.Fprintf(w, "%-8s %-16s %s\n", "time", "request", "answer")
	report(w, start, client, srv.URL+"/nope")
	for range p.Requests {
		report(w, start, client, srv.URL+"/price")
		time.Sleep(p.Pace)
	}

	for _, g := range reg.Snapshot().Groups {
		fmt.Fprintf(w, "\ngroup %s (one per host), breaker %s\n", g.Name, g.Breaker.State)
		for _, t := range g.Breaker.Transitions {
			fmt.Fprintf(w, "  %-9v -> %-9v %s\n", t.From, t.To, t.Reason)
		}
		for _, c := range g.Commands {
			fmt.Fprintf(w, "command %s:", c.Name)
			for e := range metrics.NumEvents {
				if n := c.Metrics.Cumulative[e]; n > 0 {
					fmt.Fprintf(w, " %s=%d", e, n)
				}
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}

// report makes one GET and prints what came back.
func report(w io.Writer, start time.Time, client *http.Client, url string) {
	path := url[strings.LastIndex(url, "/"):]
	resp, err := client.Get(url)
	at := time.Since(start).Round(time.Millisecond)
	if err != nil {
		fmt.Fprintf(w, "%-8s GET %-12s error: %v\n", at, path, err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	answer := fmt.Sprintf("%s %s", resp.Status, strings.TrimSpace(string(body)))
	if reason := resp.Header.Get("X-Degraded"); reason != "" {
		answer = fmt.Sprintf("%s, degraded: X-Degraded: %s, Retry-After: %s", resp.Status, reason, resp.Header.Get("Retry-After"))
	}
	fmt.Fprintf(w, "%-8s GET %-12s %s\n", at, path, answer)
}
