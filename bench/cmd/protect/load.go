package main

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// record is one request of the load generator.
type record struct {
	endpoint, phase int
	scheduled       time.Time     // when the request was due to be sent
	latency         time.Duration // from the scheduled send time to the end of the response
	outcome         string        // ok | fallback | error (from the front) | transport (no answer)
	reason          string
	took            time.Duration // time in the protected call, measured by the front
	afterOpen       bool
}

// loadGen sends requests open-loop: on a fixed schedule, whatever the answers' latency, each in
// its own goroutine, and measures latency from the scheduled time so a slow server cannot hide
// its queueing (no coordinated omission).
type loadGen struct {
	client  *http.Client
	baseURL string
	rate    int // per endpoint, requests per second

	mu      sync.Mutex
	records []record
	wg      sync.WaitGroup
}

// run sends to every endpoint for d; requests are tagged with phase (negative: not recorded).
// It returns when the last request has been sent; wait waits for the answers.
func (g *loadGen) run(phase int, d time.Duration) {
	interval := time.Second / time.Duration(g.rate)
	start := time.Now()
	var senders sync.WaitGroup
	for ep := range numEndpoints {
		senders.Add(1)
		go func() {
			defer senders.Done()
			// Stagger the endpoints by half an interval so their requests do not collide.
			next := start.Add(time.Duration(ep) * interval / numEndpoints)
			for end := start.Add(d); next.Before(end); next = next.Add(interval) {
				time.Sleep(time.Until(next))
				g.wg.Add(1)
				go g.send(ep, phase, next)
			}
		}()
	}
	senders.Wait()
}

func (g *loadGen) wait() { g.wg.Wait() }

func (g *loadGen) send(ep, phase int, scheduled time.Time) {
	defer g.wg.Done()
	r := record{endpoint: ep, phase: phase, scheduled: scheduled, outcome: "transport"}
	resp, err := g.client.Get(g.baseURL + "/" + endpointNames[ep])
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		r.outcome = resp.Header.Get(hdrOutcome)
		r.reason = resp.Header.Get(hdrReason)
		ns, _ := strconv.ParseInt(resp.Header.Get(hdrTook), 10, 64)
		r.took = time.Duration(ns)
		r.afterOpen = resp.Header.Get(hdrAfterOpen) == "1"
	}
	r.latency = time.Since(scheduled)
	if phase < 0 {
		return
	}
	g.mu.Lock()
	g.records = append(g.records, r)
	g.mu.Unlock()
}
