package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/circuit/party"
	"github.com/bulwark-go/bulwark/metrics"
)

// Keys of one breaker, under its base:
//
//	base:w  hash   instance → its window record (see window); expires a
//	               window after the last write, and readers delete stale fields
//	base:s  string the fleet state (see state); expires when no instance syncs
//	base:p  string the probe lease: "v2 epoch instance"; expires
//
// Nothing else is written, so the keys of a breaker number three whatever
// the fleet's size and history.

// syncScript reads and changes the fleet state KEYS[1] and the probe lease
// KEYS[2] of one breaker, for instance ARGV[1], atomically. It returns the
// state after the change, whether this instance holds the lease, and
// whether the state it found was garbage (then replaced).
//
// ARGV[2] is the change: "" none, "open" (the fleet opened), "close" (this
// instance's probes closed it: a fleet-wide close starts a new epoch, unless
// another instance closed it since ARGV[4]), "bump" (this instance closed
// on its own: a new epoch only). "open" is refused too when another
// instance closed the fleet since ARGV[4]: evidence from before a close
// must not open the fleet after it. ARGV[3] and ARGV[4] are the epoch and
// the last close this instance knows: a state behind them (Redis restarted
// empty, say) is brought up to them. ARGV[5] is "1" to take or keep the
// lease (half-open with traffic), "0" to give it up; a lease taken before
// the last fleet-wide close is void. ARGV[6] and ARGV[7] are the lease's
// and the state's time to live, ms.
const syncScript = `
local function num(s)
	local n = tonumber(s)
	if n and n >= 0 and n <= 1e14 and n == math.floor(n) then return n end
end
local me, op = ARGV[1], ARGV[2]
local mine, known = num(ARGV[3]), num(ARGV[4])
local e, c, o, who = mine, known, 0, me
local changed, bad = false, 0
local v = redis.call('GET', KEYS[1])
if v then
	local se, sc, so, sw = string.match(v, '^v2 (%d+) (%d+) ([01]) (%S+)$')
	se, sc = num(se), num(sc)
	if se and sc and sc <= se then
		e, c, o, who = se, sc, tonumber(so), sw
	else
		bad, changed = 1, true
	end
else
	changed = true
end
if e < mine then e, changed = mine, true end
if c < known then c, changed = known, true end
if op == 'open' and o == 0 and c <= known then
	o, who, changed = 1, me, true
elseif op == 'close' and c <= known then
	e = e + 1
	c, o, who, changed = e, 0, me, true
elseif op == 'bump' then
	e, who, changed = e + 1, me, true
end
local state = string.format('v2 %d %d %d %s', e, c, o, who)
if changed then
	redis.call('SET', KEYS[1], state, 'PX', ARGV[7])
else
	redis.call('PEXPIRE', KEYS[1], ARGV[7])
end
local held = 0
local l = redis.call('GET', KEYS[2])
local le, lw
if l then
	le, lw = string.match(l, '^v2 (%d+) (%S+)$')
	le = num(le)
end
local valid = le ~= nil and le >= c
if ARGV[5] == '1' then
	if valid and lw == me then
		redis.call('PEXPIRE', KEYS[2], ARGV[6])
		held = 1
	elseif not valid then
		redis.call('SET', KEYS[2], string.format('v2 %d %s', e, me), 'PX', ARGV[6])
		held = 1
	end
elseif lw == me then
	redis.call('DEL', KEYS[2])
end
return {state, held, bad}
`

// The changes a sync asks syncScript to make (ARGV[2]).
const (
	opNone  = ""
	opOpen  = "open"
	opClose = "close"
	opBump  = "bump"
)

// plan is one breaker's part of a sync: what was read of it before the
// round trip, and the round trip's commands.
type plan struct {
	look  party.Look
	op    string
	hset  *redis.IntCmd
	all   *redis.MapStringStringCmd
	state *redis.Cmd
}

// sync pushes every attached breaker's window (and any change of the
// fleet state) and pulls the fleet's, in one pipelined round trip bounded
// by Timeout, then judges each breaker on what came back. A failed sync
// changes nothing; DegradeAfter of them in a row make every breaker judge
// alone until a sync works again.
func (f *Fleet) sync(ctx context.Context) {
	ms := f.members()
	if len(ms) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	now := f.cfg.Now()
	nowMs := now.UnixMilli()
	pipe := f.client.Pipeline()
	ps := make([]plan, len(ms))
	for i, m := range ms {
		ps[i] = m.plan(ctx, pipe, nowMs)
	}
	cmdsRun, _ := pipe.Exec(ctx)
	for _, cmd := range cmdsRun {
		if err := cmd.Err(); err != nil && !isReply(err) {
			if f.failed(fmt.Errorf("sync: %w", err), now) {
				for _, m := range ms {
					m.coordinated.Store(false)
					m.prober.Store(false)
				}
			}
			return
		}
	}
	rejected := 0
	for i, m := range ms {
		rejected += m.apply(&ps[i], nowMs)
	}
	f.succeeded(now, rejected)
}

// isReply reports whether err is Redis's answer (redis.Nil, WRONGTYPE…)
// rather than a failure to get one.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// plan reads the breaker and queues its commands on pipe, at nowMs.
func (m *member) plan(ctx context.Context, pipe redis.Pipeliner, nowMs int64) plan {
	f := m.f
	cfg := m.b.Config()
	p := plan{look: m.h.Look()}
	if m.retagTo > 0 && nowMs >= m.retagAt {
		m.retag(m.retagTo, nowMs, cfg)
	}
	switch {
	case p.look.Closes == m.closes:
		if m.announce {
			p.op = opOpen
		}
	case p.look.LastClose == circuit.ReasonProbesSucceeded && m.fleetOpen:
		p.op = opClose
	default:
		p.op = opBump // closed on its own: only this breaker starts afresh
	}
	if len(m.drop) > 0 {
		pipe.HDel(ctx, m.base+":w", m.drop...)
		m.drop = nil
	}
	ttl := cfg.Window.Length + 2*f.interval
	p.hset = pipe.HSet(ctx, m.base+":w", f.cfg.Instance, windowOf(p.look.Window, m.tag, nowMs).String())
	pipe.PExpire(ctx, m.base+":w", ttl)
	p.all = pipe.HGetAll(ctx, m.base+":w")
	want := "0"
	if m.asked.Swap(false) && p.look.State == circuit.HalfOpen {
		want = "1"
	}
	stateTTL := 2*max(cfg.Window.Length, cfg.OpenMaxDuration) + 3*f.interval
	p.state = pipe.Eval(ctx, syncScript, []string{m.base + ":s", m.base + ":p"}, f.cfg.Instance, p.op,
		strconv.FormatInt(m.epoch, 10), strconv.FormatInt(m.followed, 10), want,
		(3 * f.interval).Milliseconds(), stateTTL.Milliseconds())
	return p
}

// apply folds one breaker's sync results into it, and returns how many
// records it rejected. A key of the wrong type makes the breaker judge
// alone (and is logged once); garbage, stale or skewed records are
// dropped from the hash and never counted.
func (m *member) apply(p *plan, nowMs int64) int {
	f := m.f
	for _, cmd := range []redis.Cmder{p.hset, p.all, p.state} {
		if err := cmd.Err(); err != nil {
			m.coordinated.Store(false) // no fleet to coordinate with: probe alone
			m.reject(fmt.Errorf("%s: %w", m.base, err))
			return 1
		}
	}
	s, held, err := scriptResult(p.state)
	if err != nil {
		m.coordinated.Store(false)
		m.reject(fmt.Errorf("%s: %w", m.base, err))
		return 1
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
	if s.bad {
		reject(fmt.Errorf("%s: %w: the state key held garbage (replaced)", m.base, errBadRecord))
	}
	m.adopt(p, s.state, nowMs, cfg)

	// The windows of this epoch: the fleet's recent calls.
	var windows []metrics.Counts
	if m.tag >= m.cutoff {
		windows = append(windows, p.look.Window)
	}
	var stale []string
	others := 0
	for inst, rec := range p.all.Val() {
		if inst == f.cfg.Instance {
			continue
		}
		w, err := parseWindow(rec, nowMs, cfg.Window.Length+2*f.interval, f.cfg.MaxSkew)
		switch {
		case err != nil:
			stale = append(stale, inst)
			if !errors.Is(err, errTooOld) { // a dead instance's last window goes quietly
				reject(fmt.Errorf("%s instance %q: %w", m.base, inst, err))
			}
		case w.Epoch < m.cutoff:
			// Counted before this breaker's last close: it must not judge
			// after it.
		case others >= f.cfg.MaxInstances:
			reject(fmt.Errorf("%s: more than MaxInstances %d instances", m.base, f.cfg.MaxInstances))
		default:
			windows = append(windows, w.counts())
			others++
		}
	}
	m.drop = stale // deleted by the next sync
	ev := judge(cfg, f.cfg.Quorum, windows)
	m.fleetOpen = s.state.Open || ev.open
	m.announce = ev.open && !s.state.Open
	if ev.open && p.look.State == circuit.Closed && (f.cfg.Quorum.Follow || !healthy(cfg, p.look.Window)) {
		m.h.Open(p.look) // refused if the breaker moved since the look
	}
	m.setNote(ev)
	m.prober.Store(held)
	m.coordinated.Store(true)
	if firstErr != nil {
		m.reject(firstErr)
	} else {
		m.rejecting = false
	}
	return rejected
}

// adopt brings the member's epochs up to state s, which this sync's script
// returned, and follows a fleet-wide close it has not followed yet.
func (m *member) adopt(p *plan, s state, nowMs int64, cfg circuit.Config) {
	m.closes = p.look.Closes
	if s.Who == m.f.cfg.Instance && (p.op == opBump || p.op == opClose && s.Closed == s.Epoch) {
		// This breaker's own close started epoch s.Epoch: its window,
		// cleared by that close, belongs to it, and nothing older counts.
		m.cutoff = s.Epoch
		m.retag(s.Epoch, nowMs, cfg)
	}
	if s.Closed > m.followed {
		// A fleet-wide close: nothing counted before it may judge after
		// it, and a breaker still out closes with the fleet.
		m.cutoff = max(m.cutoff, s.Closed)
		switch {
		case p.look.State == circuit.Closed:
			m.followed = s.Closed
		case m.h.Close(p.look):
			m.followed = s.Closed
			m.closes++
			m.retag(s.Closed, nowMs, cfg)
		}
		// Otherwise the breaker moved since the look: the next sync
		// follows.
	}
	if s.Epoch > m.epoch {
		m.epoch = s.Epoch
	}
	if m.tag < m.epoch && m.retagTo == 0 {
		// The window's contents are older than the epoch: they earn it
		// once everything counted before now has left the window.
		m.retagTo, m.retagAt = m.epoch, nowMs+(cfg.Window.Length+cfg.Window.BucketWidth()).Milliseconds()
	}
}

// retag records that the breaker's window holds only outcomes of epoch e
// or later, as of nowMs.
func (m *member) retag(e, nowMs int64, cfg circuit.Config) {
	m.tag = max(m.tag, e)
	m.retagTo = 0
	if m.tag < m.epoch {
		m.retagTo, m.retagAt = m.epoch, nowMs+(cfg.Window.Length+cfg.Window.BucketWidth()).Milliseconds()
	}
}

// scriptState is what syncScript returned.
type scriptState struct {
	state state
	bad   bool // the state key held garbage
}

// scriptResult decodes syncScript's answer.
func scriptResult(c *redis.Cmd) (scriptState, bool, error) {
	v, err := c.Slice()
	if err != nil {
		return scriptState{}, false, err
	}
	if len(v) != 3 {
		return scriptState{}, false, fmt.Errorf("%w: sync script answered %d values", errBadRecord, len(v))
	}
	raw, _ := v[0].(string)
	held, _ := v[1].(int64)
	bad, _ := v[2].(int64)
	s, err := parseState(raw)
	return scriptState{state: s, bad: bad == 1}, held == 1, err
}

// setNote sets the fleet's part of the breaker's status.
func (m *member) setNote(ev evidence) {
	if !ev.open {
		m.note.Store(nil)
		return
	}
	n := fmt.Sprintf("fleet open: %d of %d instances failing, %.0f%% of %d calls",
		ev.failing, ev.instances, 100*share(bad(ev.sum), ev.sum), calls(ev.sum))
	m.note.Store(&n)
}

// reject logs the first rejected record of an episode (the episode ends at
// a sync with none).
func (m *member) reject(err error) {
	first := !m.rejecting
	m.rejecting = true
	if first {
		f := m.f
		f.cfg.Logger.LogAttrs(context.Background(), slog.LevelWarn, "fleet: rejected shared state",
			slog.String("service", f.cfg.Service), slog.String("group", m.group),
			slog.String("command", m.cmd), slog.String("error", err.Error()))
	}
}
