package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/circuit/party"
)

// ErrClosed is returned by Attach and Start after Close.
var ErrClosed = errors.New("fleet: closed")

// Fleet shares the windows of the breakers attached to it with the other
// instances of a service through Redis. Create it with New, Attach
// breakers, then Start it; Close stops it. A Fleet is safe for concurrent
// use.
type Fleet struct {
	cfg  Config
	kick chan struct{} // a breaker changed state: sync now

	mu       sync.Mutex
	breakers []*member
	started  bool
	closed   bool
	interval time.Duration
	client   *redis.Client
	cancel   context.CancelFunc
	done     chan struct{}

	status statusBox
}

// The reasons of the transitions the fleet makes on an attached breaker.
const (
	// ReasonOpen: closed → open because the fleet opened; no local failure
	// is counted.
	ReasonOpen = party.ReasonOpen
	// ReasonClose: open or half-open → closed because the fleet's probes
	// found the dependency healthy.
	ReasonClose = party.ReasonClose
)

// member is one attached breaker: the party (party.Party) the fleet
// joins it as. The fields under "sync state" belong to the sync goroutine alone.
type member struct {
	f          *Fleet
	b          *circuit.Breaker
	h          *party.Member
	stop       func() // ends the observation of b's transitions
	group, cmd string
	base       string // key prefix of its keys

	// Read by the probe gate on the call path (half-open only).
	coordinated atomic.Bool // the last sync coordinated probes: only the lease holder probes
	prober      atomic.Bool // this instance holds the probe lease
	asked       atomic.Bool // the gate was asked since the last sync: half-open with traffic
	note        atomic.Pointer[string]

	// Sync state (see the package doc's "Epochs").
	epoch     int64    // the latest epoch seen
	followed  int64    // the last fleet-wide close followed
	cutoff    int64    // windows of an earlier epoch are not counted
	tag       int64    // the epoch of this breaker's own window's contents
	retagTo   int64    // with retagAt: the tag its window earns once older outcomes have aged out; 0: none due
	retagAt   int64    // Unix ms
	closes    uint64   // Look.Closes handled
	fleetOpen bool     // the fleet opened in the current epoch
	announce  bool     // publish that the fleet opened
	drop      []string // fields of stale or bad records, deleted at the next sync
	rejecting bool     // some record was rejected in the last sync (logged once)
}

// New returns a Fleet for cfg, or an error wrapping ErrInvalidConfig that
// names the invalid field. It does not contact Redis: Start does, in the
// background.
func New(cfg Config) (*Fleet, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Fleet{cfg: cfg, kick: make(chan struct{}, 1)}, nil
}

// Attach shares b's window as the breaker of command cmd in group (cmd ""
// for a group-level breaker): the fleet joins b as the party that shares
// its judgment (see the circuit package's "Shared judgment") and observes
// its transitions. It may be called before or after Start; until
// the first sync that works, b judges and probes alone. An empty group, a
// pair attached before, a breaker another party has joined, and Attach
// after Close are errors.
func (f *Fleet) Attach(b *circuit.Breaker, group, cmd string) error {
	if b == nil || group == "" {
		return fmt.Errorf("%w: Attach needs a breaker and a group name", ErrInvalidConfig)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fmt.Errorf("fleet: attach %q/%q: %w", group, cmd, ErrClosed)
	}
	for _, m := range f.breakers {
		if m.group == group && m.cmd == cmd {
			return fmt.Errorf("%w: breaker %q/%q attached twice", ErrInvalidConfig, group, cmd)
		}
	}
	m := &member{f: f, b: b, group: group, cmd: cmd,
		base: f.cfg.Prefix + ":" + key(f.cfg.Service) + ":" + key(group) + ":" + key(cmd)}
	h, err := party.Join(b, m)
	if err != nil {
		return fmt.Errorf("fleet: attach %q/%q: %w", group, cmd, err)
	}
	m.h = h
	m.stop = b.Observe(m.observe)
	f.breakers = append(f.breakers, m)
	return nil
}

// MayProbe is the breaker's probe gate (party.Party): while the fleet
// coordinates probes, only the holder of the probe lease sends them;
// otherwise (before the first sync, degraded, a broken key) the breaker
// probes alone. Being asked tells the next sync that this instance has
// traffic to probe with.
func (m *member) MayProbe() bool {
	if !m.asked.Load() {
		m.asked.Store(true)
	}
	return !m.coordinated.Load() || m.prober.Load()
}

// Status is the breaker's shared-state status (party.Party), shown by
// dashboards beside it.
func (m *member) Status() string {
	s := m.f.Status().String()
	if n := m.note.Load(); n != nil && !m.f.status.degraded.Load() {
		s += "; " + *n
	}
	return s
}

// observe learns of the breaker's transitions: any change but the fleet's
// own opening is shared at once (a local trip publishes the failing
// window, a close starts a new epoch, a half-open breaker wants the probe
// lease).
func (m *member) observe(t circuit.Transition) {
	if t.Reason == ReasonOpen {
		return
	}
	select {
	case m.f.kick <- struct{}{}:
	default:
	}
}

// Start connects and starts the background sync, once per Interval (and at
// once when an attached breaker changes state). It returns at once: calls
// never wait on Redis. Start twice is an error, and so is Start after
// Close (wrapping ErrClosed).
func (f *Fleet) Start() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.closed:
		return fmt.Errorf("fleet: start: %w", ErrClosed)
	case f.started:
		return fmt.Errorf("fleet: started already")
	}
	f.started = true
	f.interval = f.cfg.Interval
	if f.interval == 0 {
		f.interval = DefaultInterval
		for i, m := range f.breakers {
			if w := m.b.Config().Window.BucketWidth(); i == 0 || w < f.interval {
				f.interval = w
			}
		}
	}
	if f.cfg.Timeout == 0 {
		f.cfg.Timeout = max(f.interval, DefaultTimeout)
	}
	f.client = redis.NewClient(f.redisOptions())
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.done = cancel, make(chan struct{})
	go f.loop(ctx)
	return nil
}

// redisOptions returns the client options: the user's, with every wait
// bounded by Timeout, no retries, and a small pool (one sync at a time).
func (f *Fleet) redisOptions() *redis.Options {
	var o redis.Options
	if f.cfg.Redis != nil {
		o = *f.cfg.Redis
	} else {
		o.Addr = f.cfg.Addr
	}
	t := f.cfg.Timeout
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = t, t, t, t
	o.ContextTimeoutEnabled = true
	o.MaxRetries = -1
	o.DialerRetries = 1
	o.PoolSize = 2
	o.MinIdleConns = 0
	o.DisableIdentity = true
	o.Protocol = 2
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return &o
}

// Interval returns the sync interval in force (resolved by Start; 0 before).
func (f *Fleet) Interval() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.interval
}

// Close detaches every breaker at once (each judges and probes alone
// again: no probe gate, no shared status, no fleet verdict), stops the
// background sync, waits for it to end (at most one Timeout) and closes
// the Redis client. It works whether or not Start was called; calling it
// again does nothing. Attach and Start after Close are errors.
func (f *Fleet) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	ms, cancel, done, client := f.breakers, f.cancel, f.done, f.client
	f.mu.Unlock()
	for _, m := range ms {
		m.h.Leave() // first: a sync still in flight can no longer move it
		m.stop()
	}
	if cancel == nil {
		return nil
	}
	cancel()
	<-done
	return client.Close()
}

// members returns the attached breakers now.
func (f *Fleet) members() []*member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*member(nil), f.breakers...)
}

// loop syncs once per interval, and at once when kicked, until ctx ends.
func (f *Fleet) loop(ctx context.Context) {
	defer close(f.done)
	t := time.NewTicker(f.interval)
	defer t.Stop()
	f.sync(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-f.kick:
		}
		f.sync(ctx)
	}
}
