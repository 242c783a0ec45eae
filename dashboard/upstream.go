package dashboard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// stored is an instance's newest event of one key and when it came.
type stored struct {
	ev event
	at time.Time
}

// upstream is one instance's stream, read by its own goroutine, which
// reconnects with backoff while the instance is away.
type upstream struct {
	url    string
	a      *Aggregate
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	events    map[string]stored // newest event per key; empty while disconnected
	connected bool
}

// eventKey is the merge key of ev: its type and its name (and group, for
// commands), or "" for an event the aggregate does not merge.
func eventKey(ev event) string {
	typ, _ := ev["type"].(string)
	name, _ := ev["name"].(string)
	switch typ {
	case TypeHystrixCommand, TypeBulwarkCommand:
		group, _ := ev["group"].(string)
		return typ + "\x00" + group + "\x00" + name
	case TypeHystrixThreadPool, TypeBulwarkGroup:
		return typ + "\x00" + name
	}
	return ""
}

// run reads the instance's stream until ctx ends, reconnecting after
// ReconnectMin, then twice as long after each failed attempt up to
// ReconnectMax; a connection that delivered events resets the wait. The
// instance's events leave the totals as soon as its connection fails.
func (u *upstream) run(ctx context.Context) {
	defer close(u.done)
	cfg := &u.a.cfg
	wait := cfg.ReconnectMin
	down := false // logged as unreachable, not yet back
	for {
		got, err := u.read(ctx)
		u.drop()
		if ctx.Err() != nil {
			return
		}
		if got { // it was up: a new outage
			wait = cfg.ReconnectMin
			down = false
		}
		if !down {
			down = true
			u.a.log.Warn("dashboard: aggregate lost an instance; retrying with backoff", "url", u.url, "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, cfg.ReconnectMax)
	}
}

// read connects once and stores the events it reads until the connection
// fails, stays silent for StaleAfter, or ctx ends. It reports whether it
// got any event, and why it ended.
func (u *upstream) read(ctx context.Context) (got bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	silent := time.AfterFunc(u.a.cfg.StaleAfter, cancel)
	defer silent.Stop()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.url, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := u.a.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("dashboard: %s answered %s", u.url, resp.Status)
	}
	u.mu.Lock()
	u.connected = true
	u.mu.Unlock()

	// Events are committed a frame at a time (at its ping, or when a key
	// comes again without one), so the totals never mix half of a frame
	// with half of the one before.
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), u.a.cfg.MaxEventBytes)
	pending := make(map[string]event)
	full := false // MaxEvents reached (logged once per connection)
	commit := func() {
		if len(pending) == 0 {
			return
		}
		got = true
		if !u.store(pending) && !full {
			full = true
			u.a.log.Warn("dashboard: aggregate instance has too many keys; ignoring new ones",
				"url", u.url, "maxEvents", u.a.cfg.MaxEvents)
		}
		clear(pending)
	}
	for sc.Scan() {
		silent.Reset(u.a.cfg.StaleAfter)
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte("ping:")) {
			commit()
			continue
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // blank line, comment or another field
		}
		var ev event
		if json.Unmarshal(data, &ev) != nil {
			continue
		}
		key := eventKey(ev)
		if key == "" {
			continue
		}
		if _, again := pending[key]; again || len(pending) >= u.a.cfg.MaxEvents {
			commit()
		}
		pending[key] = ev
	}
	if err := sc.Err(); err != nil {
		return got, err
	}
	if ctx.Err() != nil {
		return got, errors.New("dashboard: instance stream silent or closed")
	}
	return got, errors.New("dashboard: instance stream ended")
}

// store keeps the events of one frame as the newest of their keys, except
// new keys past MaxEvents (it returns false if it left any out).
func (u *upstream) store(frame map[string]event) bool {
	now := time.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	all := true
	for key, ev := range frame {
		if _, ok := u.events[key]; !ok && len(u.events) >= u.a.cfg.MaxEvents {
			all = false
			continue
		}
		u.events[key] = stored{ev: ev, at: now}
	}
	return all
}

// drop forgets the instance's events: it is not connected.
func (u *upstream) drop() {
	u.mu.Lock()
	defer u.mu.Unlock()
	clear(u.events)
	u.connected = false
}

// fresh adds the instance's events younger than StaleAfter to byKey, and
// forgets the older ones (a command or pool that went away).
func (u *upstream) fresh(now time.Time, byKey map[string][]event) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for k, s := range u.events {
		if now.Sub(s.at) > u.a.cfg.StaleAfter {
			delete(u.events, k)
			continue
		}
		byKey[k] = append(byKey[k], s.ev)
	}
}
