package alert

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
)

// Watcher evaluates the alerts of the groups that name it in
// GroupConfig.Alerts (it has the methods that field asks for). Create it with New. It
// is safe for concurrent use.
type Watcher struct {
	cfg    Config     // effective
	evalMu sync.Mutex // serialises evaluations and the deliveries they make

	mu     sync.RWMutex // guards groups and stop; a group's own state has its own mutex
	groups map[*command.Group]*watched
	stop   chan struct{} // closes to stop the goroutine; nil when none runs
	done   chan struct{} // closed when that goroutine has returned

	idPanicked atomic.Bool // RequestID has panicked (logged the first time)
}

// watched is the alert state of one group. mu guards everything but g,
// quiet and logger; Status and CallFailed take it, Check holds it while it
// judges.
type watched struct {
	g      *command.Group
	quiet  func() bool // the group's, from Watch
	logger *slog.Logger

	mu       sync.Mutex
	rings    map[string]*ring   // by command; "" for the group's
	open     map[string]*outage // breakers out of the closed state, by command; "" for the group's
	degraded map[string]bool    // commands whose degraded alarm is raised
}

// outage is a breaker seen out of the closed state.
type outage struct {
	since  time.Duration // breaker clock: when it left the closed state
	reason circuit.Reason
	health circuit.Health
	tier   int // index of the highest tier fired; -1 for none
	errors []ErrorSample
	seen   time.Duration // breaker clock at the last check
	state  circuit.State // the breaker's state then
}

// New returns a Watcher configured by cfg. The error wraps
// command.ErrInvalidConfig and names the field when cfg is invalid.
func New(cfg Config) (*Watcher, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Watcher{cfg: cfg.withDefaults(), groups: map[*command.Group]*watched{}}, nil
}

// Watch starts watching g; NewGroup calls it for a group configured with
// w, with the group's quiet test (true when nothing is going on in it: no
// call in flight, every window empty, every breaker closed), which lets
// Check skip the group's snapshot, and the logger its alerts are logged
// to. The first group watched starts w's goroutine.
func (w *Watcher) Watch(g *command.Group, quiet func() bool, logger *slog.Logger) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.groups[g] != nil {
		return
	}
	w.groups[g] = &watched{g: g, quiet: quiet, logger: logger,
		rings: map[string]*ring{}, open: map[string]*outage{}, degraded: map[string]bool{}}
	if w.stop == nil {
		w.stop, w.done = make(chan struct{}), make(chan struct{})
		go w.run(w.stop, w.done)
	}
}

// Unwatch stops watching g and forgets its alert state; the group's Close
// calls it. What still fires for g is resolved first: a Resolved for each
// outage that fired a tier and a DegradedCleared for each degraded alarm,
// marked Unwatched (nobody watches g any more; its dependency did not
// necessarily recover), so a receiver such as the Webhook does not keep a
// closed group's alert firing. It waits for an evaluation in progress;
// after the last group it stops w's goroutine and waits for it.
func (w *Watcher) Unwatch(g *command.Group) {
	w.evalMu.Lock()
	w.mu.Lock()
	s := w.groups[g]
	delete(w.groups, g)
	var stop, done chan struct{}
	if len(w.groups) == 0 && w.stop != nil {
		stop, done, w.stop, w.done = w.stop, w.done, nil, nil
	}
	w.mu.Unlock()
	if s != nil {
		for _, a := range w.unwatched(s) {
			w.deliver(s.logger, a)
		}
	}
	w.evalMu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// unwatched returns the alerts that end what s still fires, by command.
func (w *Watcher) unwatched(s *watched) []Alert {
	s.mu.Lock()
	defer s.mu.Unlock()
	group := s.g.Name()
	var out []Alert
	for _, cmd := range slices.Sorted(maps.Keys(s.open)) {
		if o := s.open[cmd]; o.tier >= 0 {
			out = append(out, Alert{Kind: Resolved, Group: group, Command: cmd, Tier: w.cfg.Tiers[o.tier].Name,
				OpenFor: o.seen - o.since, State: o.state, Reason: o.reason, Health: o.health, Errors: o.errors, Unwatched: true})
		}
	}
	for _, cmd := range slices.Sorted(maps.Keys(s.degraded)) {
		out = append(out, Alert{Kind: DegradedCleared, Group: group, Command: cmd, Tier: w.cfg.Tiers[0].Name,
			Errors: s.rings[cmd].samples(), Unwatched: true})
	}
	return out
}

// run calls Check every Interval until stop closes.
func (w *Watcher) run(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			w.Check()
		}
	}
}

// CallFailed keeps the error of a call of g's command that ended in
// FAILURE or TIMEOUT, at the group's clock reading at, with the request ID
// Config.RequestID reads from the caller's ctx: the samples an alert
// quotes. Execute calls it, on failures only.
func (w *Watcher) CallFailed(ctx context.Context, g *command.Group, cmd string, at time.Duration, err error) {
	w.mu.RLock()
	s := w.groups[g]
	w.mu.RUnlock()
	if s == nil || err == nil {
		return
	}
	// One text for the command's ring and the group's.
	sample := ErrorSample{At: at, Err: cut(err.Error(), w.cfg.ErrorSampleLen)}
	if w.cfg.RequestID != nil {
		sample.RequestID = cut(w.requestID(ctx, s.logger), w.cfg.ErrorSampleLen)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range []string{cmd, ""} {
		r := s.rings[name]
		if r == nil {
			r = newRing(w.cfg.ErrorSamples)
			s.rings[name] = r
		}
		r.add(sample)
	}
}

// requestID returns Config.RequestID(ctx), or "" if it panics; the first
// panic is logged with logger.
func (w *Watcher) requestID(ctx context.Context, logger *slog.Logger) (id string) {
	defer func() {
		if p := recover(); p != nil {
			id = ""
			if w.idPanicked.CompareAndSwap(false, true) {
				logger.Error("bulwark: alert Config.RequestID panicked; samples keep no request ID when it does (logged once)",
					slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			}
		}
	}()
	return w.cfg.RequestID(ctx)
}

// Status returns the tier the breaker of g's command cmd ("" for the
// group's breaker) has reached in its current outage ("" if none) and
// whether the command's degraded alarm is raised, for g's snapshots.
func (w *Watcher) Status(g *command.Group, cmd string) (tier string, degradedAlarm bool) {
	w.mu.RLock()
	s := w.groups[g]
	w.mu.RUnlock()
	if s == nil {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.open[cmd]; o != nil && o.tier >= 0 {
		tier = w.cfg.Tiers[o.tier].Name
	}
	return tier, s.degraded[cmd]
}

// Check evaluates the alerts of every watched group now, and delivers
// those due. w's goroutine calls it every Interval; call it yourself to
// evaluate at once, such as in a test on a manual clock. Evaluations are
// serialised, so each alert fires once.
func (w *Watcher) Check() {
	w.evalMu.Lock()
	defer w.evalMu.Unlock()
	w.mu.RLock()
	groups := make([]*watched, 0, len(w.groups))
	for _, s := range w.groups {
		groups = append(groups, s)
	}
	w.mu.RUnlock()
	slices.SortFunc(groups, func(a, b *watched) int { return cmp.Compare(a.g.Name(), b.g.Name()) })
	for _, s := range groups {
		if s.idle() {
			continue
		}
		// Take the snapshot before s.mu: it reads Status, and a breaker's
		// snapshot may report a transition to an OnTransition that reads
		// the group's Snapshot too.
		snap := s.g.Snapshot()
		s.mu.Lock()
		out := w.judge(s, &snap)
		s.mu.Unlock()
		for _, a := range out {
			w.deliver(s.logger, a)
		}
	}
}

// idle reports whether s's group can raise or clear no alert now: it is
// quiet (the test Watch was given: every breaker closed, every window
// empty) and none of its outages or degraded alarms is pending. Its
// evaluation would find nothing to say, so Check skips it and its snapshot.
func (s *watched) idle() bool {
	s.mu.Lock()
	pending := len(s.open) > 0 || len(s.degraded) > 0
	s.mu.Unlock()
	return !pending && s.quiet()
}

// judge returns the alerts due for the group read in snap. s.mu is held.
func (w *Watcher) judge(s *watched, snap *command.GroupSnapshot) []Alert {
	out := w.checkBreaker(nil, s, snap.Name, "", snap.Breaker)
	for i := range snap.Commands {
		c := &snap.Commands[i]
		out = w.checkBreaker(out, s, snap.Name, c.Name, c.Breaker)
		out = w.checkDegraded(out, s, c)
	}
	return out
}

// checkDegraded appends the degraded alarm of command c, if it is raised or
// cleared now. s.mu is held.
func (w *Watcher) checkDegraded(out []Alert, s *watched, c *command.CommandSnapshot) []Alert {
	calls, rate := c.Metrics.Counts.Calls(), c.Metrics.Counts.DegradedRate()
	raised := s.degraded[c.Name]
	kind := Degraded
	switch {
	case !raised && calls >= int64(w.cfg.DegradedMinCalls) && rate > w.cfg.DegradedRate:
		s.degraded[c.Name] = true
	case raised && rate <= w.cfg.DegradedRate:
		delete(s.degraded, c.Name)
		kind = DegradedCleared
	default:
		return out
	}
	return append(out, Alert{Kind: kind, Group: s.g.Name(), Command: c.Name, Tier: w.cfg.Tiers[0].Name, State: c.Breaker.State,
		Calls: calls, DegradedRate: rate, Errors: s.rings[c.Name].samples()})
}

// deliver logs a with logger and hands it to OnAlert, recovering a panic
// there.
func (w *Watcher) deliver(logger *slog.Logger, a Alert) {
	errs := make([]string, len(a.Errors))
	for i, e := range a.Errors {
		errs[i] = e.line()
	}
	logger.LogAttrs(context.Background(), a.Kind.level(), "bulwark alert",
		slog.String("kind", a.Kind.String()),
		slog.String("group", a.Group),
		slog.String("command", a.Command),
		slog.String("tier", a.Tier),
		slog.String("action", a.Action()),
		slog.Duration("open_for", a.OpenFor),
		slog.String("state", a.State.String()),
		slog.String("reason", string(a.Reason)),
		slog.Int64("requests", a.Health.Requests),
		slog.Float64("error_ratio", a.Health.ErrorRatio),
		slog.Float64("slow_ratio", a.Health.SlowRatio),
		slog.Int64("calls", a.Calls),
		slog.Float64("degraded_rate", a.DegradedRate),
		slog.Any("errors", errs),
	)
	if w.cfg.OnAlert == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			logger.Error("bulwark: OnAlert panicked", slog.String("group", a.Group),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
		}
	}()
	w.cfg.OnAlert(a)
}

var _ = command.GroupConfig{Alerts: (*Watcher)(nil)}
