package main

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// load sends requests to the front open-loop: on a fixed schedule per
// route, whatever the answers' latency, each in its own goroutine, and
// measures latency from the scheduled time, so a slow service cannot hide
// its queueing (no coordinated omission). Every request is recorded.
type load struct {
	clock     metrics.Clock
	client    *http.Client
	transport *http.Transport
	baseURL   string
	rate      int // per route, requests per second
	rec       *recorder
	inflight  sync.WaitGroup
}

func newLoad(clock metrics.Clock, baseURL string, rate int, rec *recorder) *load {
	tr := &http.Transport{MaxIdleConnsPerHost: 1024, IdleConnTimeout: 30 * time.Second}
	return &load{clock: clock, client: &http.Client{Transport: tr, Timeout: 5 * time.Second}, transport: tr,
		baseURL: baseURL, rate: rate, rec: rec}
}

// prime sends one request to route, unrecorded, and checks that the front
// answers it.
func (l *load) prime(route string) error {
	resp, err := l.client.Get(l.baseURL + "/" + route)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if o := resp.Header.Get(hdrOutcome); o != outcomeOK {
		return fmt.Errorf("priming %s: the front answered %s (%s)", route, o, resp.Header.Get(hdrEvent))
	}
	return nil
}

// start sends to every route for d, and returns a channel closed when
// every request sent has been answered.
func (l *load) start(d time.Duration) <-chan struct{} {
	interval := time.Second / time.Duration(l.rate)
	begin := l.clock.Now()
	var senders sync.WaitGroup
	for i, route := range routes {
		senders.Add(1)
		go func() {
			defer senders.Done()
			// Stagger the routes so that their requests do not collide.
			next := begin + time.Duration(i)*interval/time.Duration(len(routes))
			for end := begin + d; next < end; next += interval {
				time.Sleep(next - l.clock.Now())
				l.inflight.Add(1)
				go l.send(route, next)
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		senders.Wait()
		l.inflight.Wait()
		close(done)
	}()
	return done
}

// send sends one request to route, scheduled at the clock reading at.
func (l *load) send(route string, at time.Duration) {
	defer l.inflight.Done()
	c := call{Route: route, Start: at, Lag: l.clock.Now() - at, Outcome: outcomeNoAnswer}
	resp, err := l.client.Get(l.baseURL + "/" + route)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		c.Outcome = resp.Header.Get(hdrOutcome)
		c.Event = resp.Header.Get(hdrEvent)
		c.Fallback = resp.Header.Get(hdrFallback)
	}
	c.Latency = l.clock.Now() - at
	l.rec.call(c)
}

// close releases the generator's connections.
func (l *load) close() { l.transport.CloseIdleConnections() }
