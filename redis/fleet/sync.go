package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/metrics"
)

// Keys of one breaker, under its base:
//
//	base:w  hash  instance → its window record (see window); expires a
//	              window after the last write, and readers delete stale fields
//	base:s  string the last fleet verdict (see verdict); expires
//	base:p  string the probe lease: the instance allowed to probe; expires
//
// Nothing else is written, so the keys of a breaker number three whatever
// the fleet's size and history.

// leaseScript takes or renews the probe lease KEYS[1] for instance ARGV[1]
// for ARGV[2] ms, and returns 1 if this instance holds it: the holder keeps
// it while its breaker is not closed, and another instance gets it only
// once the holder has stopped renewing it (closed, or gone).
const leaseScript = `
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	return 1
end
if v then
	return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`

// cmds are one breaker's commands in a sync's pipeline.
type cmds struct {
	pub   *redis.StatusCmd // nil unless a verdict is published
	pubV  *verdict
	hset  *redis.IntCmd
	all   *redis.MapStringStringCmd
	state *redis.StringCmd
	lease *redis.Cmd    // nil while closed
	ttl   time.Duration // the window hash's
}

// sync pushes every attached breaker's window (and any verdict to publish)
// and pulls the fleet's, in one pipelined round trip bounded by Timeout.
// On failure every breaker judges alone until a sync works again.
func (f *Fleet) sync(ctx context.Context) {
	ms := f.members()
	if len(ms) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	now := f.cfg.Now()
	nowMs := now.UnixMilli()
	lease := 3 * f.interval
	pipe := f.client.Pipeline()
	cs := make([]cmds, len(ms))
	for i, m := range ms {
		c := &cs[i]
		cfg := m.b.Config()
		c.ttl = cfg.Window.Length + 2*f.interval
		m.mu.Lock()
		rec := windowOf(m.b.LocalWindow(), nowMs, m.reset)
		c.pubV = m.publish
		drop := m.drop
		m.drop = nil
		m.mu.Unlock()
		if len(drop) > 0 {
			pipe.HDel(ctx, m.base+":w", drop...)
		}
		if c.pubV != nil {
			c.pub = pipe.Set(ctx, m.base+":s", c.pubV.String(), 2*max(cfg.MaxOpenDuration, cfg.Window.Length))
		}
		c.hset = pipe.HSet(ctx, m.base+":w", f.cfg.Instance, rec.String())
		pipe.PExpire(ctx, m.base+":w", c.ttl)
		c.all = pipe.HGetAll(ctx, m.base+":w")
		c.state = pipe.Get(ctx, m.base+":s")
		if m.b.State() != circuit.Closed {
			c.lease = pipe.Eval(ctx, leaseScript, []string{m.base + ":p"}, f.cfg.Instance, lease.Milliseconds())
		}
	}
	cmdsRun, _ := pipe.Exec(ctx)
	for _, cmd := range cmdsRun {
		if err := cmd.Err(); err != nil && !isReply(err) {
			if f.failed(fmt.Errorf("sync: %w", err), now) {
				for _, m := range ms {
					m.b.ClearExternal()
					m.prober.Store(false)
				}
			}
			return
		}
	}
	rejected := 0
	for i, m := range ms {
		rejected += f.apply(m, &cs[i], nowMs)
	}
	f.succeeded(now, rejected)
}

// isReply reports whether err is Redis's answer (redis.Nil, WRONGTYPE…)
// rather than a failure to get one.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// apply folds one breaker's sync results into it, and returns how many
// records it rejected. A key of the wrong type makes the breaker judge
// alone (and is logged once); garbage, stale or skewed records are
// dropped from the hash and never counted.
func (f *Fleet) apply(m *member, c *cmds, nowMs int64) int {
	for _, cmd := range []redis.Cmder{c.hset, c.all} {
		if err := cmd.Err(); err != nil {
			m.b.ClearExternal()
			m.prober.Store(true) // no fleet to coordinate with: probe alone
			m.reject(f, fmt.Errorf("%s: %w", m.base, err))
			return 1
		}
	}
	cfg := m.b.Config()
	rejected := 0
	var firstErr error
	reject := func(err error) {
		rejected++
		if firstErr == nil {
			firstErr = err
		}
	}
	m.mu.Lock()
	if c.pubV != nil && c.pub.Err() == nil {
		m.lastVerdict = max(m.lastVerdict, c.pubV.At)
		if !c.pubV.Open {
			m.closedAt = c.pubV.At
		}
		if m.publish == c.pubV {
			m.publish = nil
		}
	}
	m.mu.Unlock()

	// The verdict first: a published opening is why the fleet opens.
	if err := c.state.Err(); err == nil {
		v, err := parseVerdict(c.state.Val(), nowMs, max(cfg.MaxOpenDuration, cfg.Window.Length), f.cfg.MaxSkew)
		if err != nil {
			reject(fmt.Errorf("%s: %w", m.base, err))
		} else {
			m.follow(f, v, nowMs, cfg.OpenDuration)
		}
	} else if !errors.Is(err, redis.Nil) {
		reject(fmt.Errorf("%s: %w", m.base, err))
	}
	m.mu.Lock()
	closedAt := m.closedAt
	m.mu.Unlock()
	var sum metrics.Counts
	var stale []string
	n := 0
	for inst, rec := range c.all.Val() {
		if inst == f.cfg.Instance {
			continue
		}
		w, err := parseWindow(rec, nowMs, c.ttl, f.cfg.MaxSkew)
		switch {
		case err != nil:
			stale = append(stale, inst)
			if !errors.Is(err, errTooOld) { // a dead instance's last window goes quietly
				reject(fmt.Errorf("%s instance %q: %w", m.base, inst, err))
			}
		case w.Reset+f.cfg.MaxSkew.Milliseconds() < closedAt:
			// Counted before the fleet last closed: old failures must not
			// reopen it.
		case n >= f.cfg.MaxInstances:
			reject(fmt.Errorf("%s: more than MaxInstances %d instances", m.base, f.cfg.MaxInstances))
		default:
			w.addTo(&sum)
			n++
		}
	}
	m.mu.Lock()
	m.drop = stale // deleted by the next sync
	m.mu.Unlock()
	if err := m.b.SetExternal(sum, 3*f.interval); err != nil {
		reject(err)
	}

	if c.lease != nil {
		held, err := c.lease.Int()
		if err != nil { // a bad lease key: probe alone rather than never
			reject(fmt.Errorf("%s: probe lease: %w", m.base, err))
		}
		m.prober.Store(err != nil || held == 1)
	} else {
		m.prober.Store(false)
	}
	if firstErr != nil {
		m.reject(f, firstErr)
	} else {
		m.mu.Lock()
		m.rejecting = false
		m.mu.Unlock()
	}
	return rejected
}

// follow applies a fleet verdict another instance published, once.
func (m *member) follow(f *Fleet, v verdict, nowMs int64, openFor time.Duration) {
	m.mu.Lock()
	if v.At <= m.lastVerdict || v.Instance == f.cfg.Instance {
		m.mu.Unlock()
		return
	}
	m.lastVerdict = v.At
	if !v.Open {
		m.closedAt = v.At
		m.reset = nowMs
	}
	m.mu.Unlock()
	switch {
	case v.Open && v.At >= nowMs-openFor.Milliseconds():
		m.b.OpenByFleet()
	case !v.Open:
		m.b.CloseByFleet()
	}
}

// reject logs the first rejected record of an episode (the episode ends at
// a sync with none).
func (m *member) reject(f *Fleet, err error) {
	m.mu.Lock()
	first := !m.rejecting
	m.rejecting = true
	m.mu.Unlock()
	if first {
		f.cfg.Logger.LogAttrs(context.Background(), slog.LevelWarn, "fleet: rejected shared state",
			slog.String("service", f.cfg.Service), slog.String("group", m.group),
			slog.String("command", m.cmd), slog.String("error", err.Error()))
	}
}
