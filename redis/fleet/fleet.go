package fleet

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/bulwark-go/bulwark/circuit"
)

// Fleet shares the windows of the breakers attached to it with the other
// instances of a service through Redis. Create it with New, Attach
// breakers, then Start it; Close stops it. A Fleet is safe for concurrent
// use.
type Fleet struct {
	cfg    Config
	client *redis.Client
	kick   chan struct{} // a breaker has a verdict to publish now

	mu       sync.Mutex
	breakers []*member
	started  bool
	interval time.Duration
	cancel   context.CancelFunc
	done     chan struct{}

	status statusBox
}

// member is one attached breaker and what the fleet knows of it.
type member struct {
	b          *circuit.Breaker
	group, cmd string
	base       string      // key prefix of its keys
	prober     atomic.Bool // this instance holds the probe lease
	fleet      *Fleet

	mu          sync.Mutex
	reset       int64    // Unix ms when its window was last cleared
	publish     *verdict // to publish at the next sync
	lastVerdict int64    // At of the last verdict applied or published
	closedAt    int64    // At of the last closed verdict: windows cleared before it are old
	drop        []string // fields of stale or bad records, deleted at the next sync
	rejecting   bool     // some record was rejected in the last sync (logged once)
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
// for a group-level breaker). Attach installs b's probe gate and watcher
// (replacing any), so b must be attached to one Fleet only. It may be
// called before or after Start. An empty group, or a pair attached before,
// is an error.
func (f *Fleet) Attach(b *circuit.Breaker, group, cmd string) error {
	if b == nil || group == "" {
		return fmt.Errorf("%w: Attach needs a breaker and a group name", ErrInvalidConfig)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.breakers {
		if m.group == group && m.cmd == cmd {
			return fmt.Errorf("%w: breaker %q/%q attached twice", ErrInvalidConfig, group, cmd)
		}
	}
	m := &member{b: b, group: group, cmd: cmd, fleet: f, reset: f.cfg.Now().UnixMilli(),
		base: f.cfg.Prefix + ":" + key(f.cfg.Service) + ":" + key(group) + ":" + key(cmd)}
	b.SetProbeGate(m.mayProbe)
	b.Watch(m.watch)
	b.SetSharedStatus(func() string { return f.Status().String() })
	f.breakers = append(f.breakers, m)
	return nil
}

// mayProbe is the breaker's probe gate: while shared state works, only the
// holder of the fleet's probe lease sends probes; degraded, every instance
// judges alone.
func (m *member) mayProbe() bool { return m.prober.Load() || m.fleet.status.degraded.Load() }

// watch learns of the breaker's transitions: a local trip or a local close
// by probes is published to the fleet at once; any close starts a new
// window.
func (m *member) watch(t circuit.Transition) {
	now := m.fleet.cfg.Now().UnixMilli()
	m.mu.Lock()
	if t.To == circuit.Closed {
		m.reset = now
	}
	switch {
	case t.To == circuit.Open && t.Reason != circuit.ReasonFleetOpen && t.Reason != circuit.ReasonForced:
		m.publish = &verdict{Open: true, At: now, Instance: m.fleet.cfg.Instance}
	case t.To == circuit.Closed && t.Reason == circuit.ReasonProbesSucceeded:
		m.publish = &verdict{Open: false, At: now, Instance: m.fleet.cfg.Instance}
	}
	pub := m.publish != nil
	m.mu.Unlock()
	if pub {
		select {
		case m.fleet.kick <- struct{}{}:
		default:
		}
	}
}

// Start connects and starts the background sync, once per Interval (and at
// once when an attached breaker opens). It returns at once: calls never wait
// on Redis. Start after Close, or twice, is an error.
func (f *Fleet) Start() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started {
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
		f.cfg.Timeout = min(f.interval/2, 250*time.Millisecond)
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

// Close stops the background sync, waits for it to end (at most one
// Timeout), detaches every breaker (probe gates, watchers and external
// counts removed: each judges alone again) and closes the Redis client.
// Calling it again does nothing.
func (f *Fleet) Close() error {
	f.mu.Lock()
	cancel, done := f.cancel, f.done
	f.cancel = nil
	f.started = true
	f.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	<-done
	for _, m := range f.members() {
		m.b.SetProbeGate(nil)
		m.b.Watch(nil)
		m.b.SetSharedStatus(nil)
		m.b.ClearExternal()
	}
	return f.client.Close()
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
