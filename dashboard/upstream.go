package dashboard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bulwark-go/bulwark/command"
)

// What the aggregate keeps of an instance's event: the fields it merges,
// nothing else, each bounded, so that what an instance sends cannot grow
// what the aggregate holds (see AggregateConfig.MaxEvents).
const (
	// maxText is the longest string kept of a field that is not a name
	// (a state, a reason, a health check's line): longer ones are cut.
	maxText = 128
	// maxTransitions is how many breaker transitions of a native event are
	// kept, the newest: as many as a breaker remembers.
	maxTransitions = 8
	// maxKeyMemory bounds what one key of an instance costs the aggregate:
	// its decoded event (at most about 6 KiB, a native event with every
	// text and transition at its bound; 0.2 to 1.5 KiB as bulwark sends
	// them), its key and its map entry. TestDecodedEventsAreBounded checks
	// it and logs the figures.
	maxKeyMemory = 8 << 10
)

// errLongName is why an event whose name or group is longer than
// command.MaxNameLength is skipped: no registry names a command so.
var errLongName = fmt.Errorf("a name is longer than %d bytes", command.MaxNameLength)

// upEvent is one event of an instance, as the aggregate keeps it: a
// *hystrixCommand, *hystrixThreadPool, *nativeCommand or *nativeGroup.
type upEvent interface {
	// key is its merge key: its type and its name (and group, for
	// commands).
	key() string
	// bound cuts its texts to maxText bytes and its transitions to the
	// newest maxTransitions, or reports errLongName.
	bound() error
}

// nativeCommand and nativeGroup are the native events as an instance
// sends them and the aggregate merges them: a plain instance sends no
// reportingHosts (1), an aggregate the number it merged. Transitions
// shadows the embedded breaker's field (a shallower field wins, in and
// out), so that decoding keeps only the newest maxTransitions of a list of
// any length.
type (
	nativeCommand struct {
		bulwarkCommand
		Transitions    transitions `json:"transitions"`
		ReportingHosts int64       `json:"reportingHosts"`
	}
	nativeGroup struct {
		bulwarkGroup
		Transitions    transitions `json:"transitions"`
		ReportingHosts int64       `json:"reportingHosts"`
	}
)

// transitions is a breaker's transitions, oldest first, as the aggregate
// decodes them: the newest maxTransitions only, read one at a time, so that
// a long list costs no more than a short one.
type transitions []transition

// UnmarshalJSON keeps the newest maxTransitions transitions of the JSON
// array (or null) data.
func (ts *transitions) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok == nil {
		*ts = nil
		return err
	}
	ring := make([]transition, 0, maxTransitions)
	n := 0
	for dec.More() {
		var t transition
		if err := dec.Decode(&t); err != nil {
			return err
		}
		if len(ring) < maxTransitions {
			ring = append(ring, t)
		} else {
			ring[n%maxTransitions] = t
		}
		n++
	}
	if n > maxTransitions { // oldest first
		start := n % maxTransitions
		ring = append(ring[start:], ring[:start]...)
	}
	*ts = ring
	_, err := dec.Token()
	return err
}

func (e *hystrixCommand) key() string    { return commandKey(e.Type, e.Group, e.Name) }
func (e *hystrixThreadPool) key() string { return e.Type + "\x00" + e.Name }
func (e *nativeCommand) key() string     { return commandKey(e.Type, e.Group, e.Name) }
func (e *nativeGroup) key() string       { return e.Type + "\x00" + e.Name }

func commandKey(typ, group, name string) string { return typ + "\x00" + group + "\x00" + name }

func (e *hystrixCommand) bound() error {
	if e.ExecutionIsolationThreadPoolKeyOverride != nil {
		if err := names(*e.ExecutionIsolationThreadPoolKeyOverride); err != nil {
			return err
		}
	}
	cut(&e.ExecutionIsolationStrategy)
	return names(e.Name, e.Group, e.ThreadPool)
}

func (e *hystrixThreadPool) bound() error { return names(e.Name) }

func (e *nativeCommand) bound() error {
	e.breaker.bound()
	e.Transitions = e.Transitions.bound()
	cut(&e.GroupState, &e.GroupMode, &e.AlertTier)
	return names(e.Name, e.Group)
}

func (e *nativeGroup) bound() error {
	e.breaker.bound()
	e.Transitions = e.Transitions.bound()
	cut(&e.Strategy, &e.AlertTier)
	return names(e.Name)
}

func (b *breaker) bound() {
	cut(&b.State, &b.Mode, &b.Reason, &b.Shared, &b.HealthCheck)
}

// bound cuts the transitions' texts; it returns them, [] for none (as a
// stream sends them, never null).
func (ts transitions) bound() transitions {
	for i := range ts {
		cut(&ts[i].From, &ts[i].To, &ts[i].Reason)
	}
	if ts == nil {
		return transitions{}
	}
	return ts
}

// names returns errLongName if a name is longer than command.MaxNameLength.
func names(ns ...string) error {
	for _, n := range ns {
		if len(n) > command.MaxNameLength {
			return errLongName
		}
	}
	return nil
}

// cut cuts each string to at most maxText bytes, between runes, in a copy
// of its own (a cut string would keep the long one alive).
func cut(ss ...*string) {
	for _, s := range ss {
		if n := maxText; len(*s) > n {
			for !utf8.RuneStart((*s)[n]) {
				n--
			}
			*s = strings.Clone((*s)[:n])
		}
	}
}

// decodeEvent decodes the JSON event data into the fields the aggregate
// merges, bounded (see upEvent). It returns nil without error for an event
// type the aggregate does not merge.
func decodeEvent(data []byte) (upEvent, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, err
	}
	var ev upEvent
	switch head.Type {
	case TypeHystrixCommand:
		ev = new(hystrixCommand)
	case TypeHystrixThreadPool:
		ev = new(hystrixThreadPool)
	case TypeBulwarkCommand:
		ev = new(nativeCommand)
	case TypeBulwarkGroup:
		ev = new(nativeGroup)
	default:
		return nil, nil
	}
	if err := json.Unmarshal(data, ev); err != nil {
		return nil, err
	}
	if err := ev.bound(); err != nil {
		return nil, err
	}
	return ev, nil
}

// stored is an instance's newest event of one key and when it came.
type stored struct {
	ev upEvent
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
	pending := make(map[string]upEvent)
	full := false    // MaxEvents reached (logged once per connection)
	skipped := false // an event could not be read (logged once per connection)
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
		ev, err := decodeEvent(data)
		if err != nil && !skipped {
			skipped = true
			u.a.log.Warn("dashboard: aggregate skips events of an instance it cannot read", "url", u.url, "err", err)
		}
		if ev == nil {
			continue
		}
		key := ev.key()
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
func (u *upstream) store(frame map[string]upEvent) bool {
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
func (u *upstream) fresh(now time.Time, byKey map[string][]upEvent) {
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
