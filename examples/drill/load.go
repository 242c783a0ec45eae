package main

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// load sends requests to the front open-loop: on a fixed schedule per
// route, whatever the answers' latency, each in its own goroutine, and
// measures latency from the moment a request fell due, so a slow service
// cannot hide its queueing (no coordinated omission). Every request is
// recorded. The schedule is kept on the drill's clock (pacedClock): a
// generator that falls behind it does not send the requests it missed in
// a burst, it goes on from where it is, and the drill's time stood still
// meanwhile.
type load struct {
	clock     *pacedClock
	client    *http.Client
	transport *http.Transport
	baseURL   string
	rate      int // per route, requests per second
	rec       *recorder
	inflight  sync.WaitGroup
}

func newLoad(clock *pacedClock, baseURL string, rate int, rec *recorder) *load {
	tr := &http.Transport{MaxIdleConnsPerHost: 1024, IdleConnTimeout: 30 * time.Second}
	return &load{clock: clock, client: &http.Client{Transport: tr, Timeout: 5 * time.Second}, transport: tr,
		baseURL: baseURL, rate: rate, rec: rec}
}

// get sends a GET to route for a call scheduled at the instant at, which
// it carries in hdrStart.
func (l *load) get(route string, at time.Duration) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, l.baseURL+"/"+route, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(hdrStart, strconv.FormatInt(int64(at), 10))
	return l.client.Do(req)
}

// prime sends one request to route, unrecorded (its arrival at the
// backend falls before the drill's start), and checks that the front
// answers it.
func (l *load) prime(route string) error {
	resp, err := l.get(route, l.clock.Now())
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

// action is one thing the generator does at an instant of the drill's
// clock: a step of the script (do, called with the instant), or a request
// to route.
type action struct {
	at    time.Duration
	route string
	do    func(at time.Duration)
}

// start sends to every route for d and takes the steps of script (each at
// its offset from now) as they fall due, all on one goroutine in the order
// of their instants (a step before a request due at the same instant), and
// returns a channel closed when every request sent has been answered. So a
// step divides the requests exactly: those sent before it are due before
// it, however late the generator runs.
func (l *load) start(d time.Duration, script []action) <-chan struct{} {
	interval := time.Second / time.Duration(l.rate)
	begin := l.clock.Now()
	var actions []action
	for _, s := range script {
		actions = append(actions, action{at: begin + s.at, do: s.do})
	}
	for i, route := range routes {
		// Stagger the routes so that their requests do not collide.
		for at := begin + time.Duration(i)*interval/time.Duration(len(routes)); at < begin+d; at += interval {
			actions = append(actions, action{at: at, route: route})
		}
	}
	slices.SortStableFunc(actions, func(a, b action) int { return cmp.Compare(a.at, b.at) })
	done := make(chan struct{})
	go func() {
		for i, a := range actions {
			then := time.Duration(math.MaxInt64)
			if i+1 < len(actions) {
				then = actions[i+1].at
			}
			due := l.clock.reach(a.at, then)
			if a.do != nil {
				a.do(a.at)
				continue
			}
			l.inflight.Add(1)
			go l.send(a.route, a.at, due)
		}
		l.inflight.Wait()
		close(done)
	}()
	return done
}

// send sends one request to route, scheduled at the instant at of the
// drill's clock, which fell due at the system clock's reading due: its
// send lag and latency run from due, on the system clock.
func (l *load) send(route string, at, due time.Duration) {
	defer l.inflight.Done()
	c := call{Route: route, Start: at, Lag: l.clock.sys.Now() - due, Outcome: outcomeNoAnswer}
	resp, err := l.get(route, at)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		c.Outcome = resp.Header.Get(hdrOutcome)
		c.Event = resp.Header.Get(hdrEvent)
		c.Fallback = resp.Header.Get(hdrFallback)
	}
	c.Latency = l.clock.sys.Now() - due
	l.rec.call(c)
}

// close releases the generator's connections.
func (l *load) close() { l.transport.CloseIdleConnections() }

// pacedClock is the drill's clock: the system clock less the time the
// load generator has fallen behind its schedule, which never passes the
// instant of the generator's next action. While the generator is late,
// the drill's time stands still just before that instant; when the
// generator takes the action, time goes on from it. So every instant the
// drill records (the script's, the calls', the backend's arrivals, and the
// breakers' transitions: the registry runs on this clock) falls where the
// schedule puts it, and each window, open duration and phase of the drill
// holds the calls the schedule gives it, however slow the machine is to
// keep to it; a timeout still runs on the system clock. It is safe for
// concurrent use.
type pacedClock struct {
	sys    metrics.Clock
	mu     sync.Mutex
	behind time.Duration // how far the generator has fallen behind, in all
	next   time.Duration // the instant of its next action
}

func newPacedClock(sys metrics.Clock) *pacedClock {
	return &pacedClock{sys: sys, next: math.MaxInt64}
}

// Now returns the drill's time: at most just before the generator's next
// action.
func (c *pacedClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return min(c.sys.Now()-c.behind, c.next-1)
}

// reach waits until the clock reaches at, the instant of the generator's
// next action, and returns the system clock's reading at which the action
// fell due (the generator is late by the time since); then is the instant
// of the action after it (math.MaxInt64: none).
func (c *pacedClock) reach(at, then time.Duration) (due time.Duration) {
	for {
		c.mu.Lock()
		d := at - (c.sys.Now() - c.behind)
		if d <= 0 {
			due = at + c.behind
			c.behind -= d // the clock stood still at at while the generator was late
			c.next = then
			c.mu.Unlock()
			return due
		}
		c.mu.Unlock()
		time.Sleep(d)
	}
}
