package dashboard

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// frame is one tick's worth of stream bytes: every event of one snapshot
// and the ping, encoded once and shared read-only by every client.
type frame struct {
	data []byte
}

// client is one stream connection's mailbox. It holds only the newest frame:
// a client slower than its hub skips the frames it had no time to write, and
// the hub never waits for it.
type client struct {
	next atomic.Pointer[frame]
	wake chan struct{} // capacity 1: "next has something"
	quit chan struct{} // closed by end: Stream.Close or the server's Shutdown

	srv   *http.Server // the server the request came through; nil if unknown
	ended bool         // quit is closed; guarded by Stream.mu
	first []byte       // the history, written before the first frame
}

func newClient(srv *http.Server) *client {
	return &client{wake: make(chan struct{}, 1), quit: make(chan struct{}), srv: srv}
}

// end tells c's handler to stop streaming. The caller holds Stream.mu.
func (c *client) end() {
	if !c.ended {
		c.ended = true
		close(c.quit)
	}
}

// offer replaces the pending frame with f and wakes the client. It never
// blocks.
func (c *client) offer(f *frame) {
	c.next.Store(f)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// hub ticks at one delay for every client that asked for it: it takes one
// snapshot per tick, encodes it once and offers the frame to each client.
// It starts with its first client and stops when the last one leaves.
type hub struct {
	s     *Stream
	delay time.Duration
	stop  chan struct{} // closed by Stream.leave for the last client
	done  chan struct{} // closed when run returns

	mu      sync.Mutex
	clients map[*client]struct{}
	latest  *frame // the newest frame, for clients that join between ticks

	// run's own, unguarded:
	enc     encoder // reusable event values
	size    int     // length of the previous frame, the next buffer's capacity
	failing bool    // the previous frame could not be built (logged once)
}

func newHub(s *Stream, delay time.Duration) *hub {
	return &hub{
		s:       s,
		delay:   delay,
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		clients: make(map[*client]struct{}),
		enc:     encoder{hist: s.hist},
	}
}

// add registers c and hands it the newest frame at once, if there is one.
func (h *hub) add(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clients[c] = struct{}{}
	if h.latest != nil {
		c.offer(h.latest)
	}
}

// remove unregisters c and reports whether it was the last client.
func (h *hub) remove(c *client) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, c)
	return len(h.clients) == 0
}

// run publishes a frame at once, then one per delay, until stop is closed.
func (h *hub) run() {
	defer close(h.done)
	t := time.NewTicker(h.delay)
	defer t.Stop()
	for {
		h.publish()
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
	}
}

// publish takes one snapshot, encodes it and offers it to every client.
//
// A Source.Snapshot that panics (or a snapshot that cannot be encoded) does
// not end the hub nor its clients: the panic is recovered, the clients get
// a ping-only frame for that tick and real frames again as soon as a
// snapshot succeeds. The first failure of a run is logged at Error (a panic
// with its value and stack), the recovery at Info, so a Source that fails
// on every tick does not flood the log.
func (h *hub) publish() {
	data, err := h.s.safeFrame(&h.enc, h.size)
	switch {
	case err != nil && !h.failing:
		h.failing = true
		h.s.log.Error("dashboard: cannot build a stream frame; sending pings until it works again",
			"delay", h.delay, "err", err)
	case err == nil && h.failing:
		h.failing = false
		h.s.log.Info("dashboard: stream frames built again", "delay", h.delay)
	}
	if err != nil {
		data = ping
	}
	h.size = len(data)
	f := &frame{data: data}

	h.mu.Lock()
	defer h.mu.Unlock()
	h.latest = f
	for c := range h.clients {
		c.offer(f)
	}
}
