package command

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/metrics"
)

// Defaults of AlertConfig.
const (
	DefaultAlertInterval    = time.Second
	DefaultDegradedRate     = 0.05
	DefaultDegradedMinCalls = 20
	DefaultErrorSamples     = 5
	DefaultErrorSampleLen   = 200
)

// AlertTier is one step of escalation: a breaker that has not been closed
// for After is an incident of this tier.
type AlertTier struct {
	Name  string        // such as "P3"; shown in alerts and on the dashboard
	After time.Duration // how long the breaker has been out of the closed state
}

// DefaultAlertTiers returns the tiers used when AlertConfig.Tiers is empty,
// from an incident review: open 1 minute is P3 (record, no page), 10 minutes
// P2 (page on-call), 30 minutes P1 (escalate, involve the downstream team).
// 80% of that team's downstream faults healed within 10 minutes, and paging
// at 1 minute caused 20 pages a week for 3 real faults.
func DefaultAlertTiers() []AlertTier {
	return []AlertTier{{"P3", time.Minute}, {"P2", 10 * time.Minute}, {"P1", 30 * time.Minute}}
}

// AlertConfig turns on a group's alerts: tiers by how long a breaker (the
// group's or a command's) has been out of the closed state, and an alarm on
// each command's degraded rate. Alerts are values handed to OnAlert and
// logged; paging is up to OnAlert. The zero value is off; every other field
// needs OnAlert.
//
// Evaluation: the group's one goroutine calls Group.CheckAlerts every
// Interval (no goroutine per breaker; it stops with the group's Close). A
// tier fires within about Interval of being reached. A breaker in
// observe-only mode alerts as in normal mode (it shows what would have been
// refused); one forced open by SetMode is an operator's decision, not an
// outage: it fires no tier and ends the outage in progress.
type AlertConfig struct {
	// OnAlert receives every alert, in order, never concurrently with
	// itself, after it is logged. It may read the group (Snapshot) but must
	// not call CheckAlerts; the group's Close waits for a delivery in
	// progress. A panic in it is recovered and logged. nil:
	// alerts off. To only log alerts, pass a function that does nothing.
	OnAlert func(Alert)
	// Tiers are the escalation steps, in increasing After, with distinct
	// non-empty names. Each outage fires each tier it reaches once; if an
	// evaluation finds several newly reached (a breaker already long open
	// when alerts start), only the highest fires. Default
	// DefaultAlertTiers().
	Tiers []AlertTier
	// DegradedRate is the degraded share (calls answered by a fallback /
	// calls, over the command's window) above which a command's degraded
	// alarm fires (AlertDegraded), once; it clears (AlertDegradedCleared)
	// once the share is back at or below it. In (0, 1]; default 0.05.
	DegradedRate float64
	// DegradedMinCalls is how many calls the window must hold before the
	// degraded alarm can fire: one degraded call of one is not an
	// incident. Default 20.
	DegradedMinCalls int
	// Interval is how often alerts are evaluated. Default 1 s.
	Interval time.Duration
	// ErrorSamples is how many of the last errors (FAILURE and TIMEOUT
	// causes) each command and the group keep for alerts: a ring, written
	// on failures only. Default 5.
	ErrorSamples int
	// ErrorSampleLen bounds each sample's error text, in bytes (cut at a
	// character boundary). Only error text is kept, never values or
	// payloads. Default 200.
	ErrorSampleLen int
}

// withDefaults returns c with its defaults applied (when alerts are on).
func (c AlertConfig) withDefaults() AlertConfig {
	if c.OnAlert == nil {
		return c
	}
	if len(c.Tiers) == 0 {
		c.Tiers = DefaultAlertTiers()
	}
	if c.DegradedRate == 0 {
		c.DegradedRate = DefaultDegradedRate
	}
	if c.DegradedMinCalls == 0 {
		c.DegradedMinCalls = DefaultDegradedMinCalls
	}
	if c.Interval == 0 {
		c.Interval = DefaultAlertInterval
	}
	if c.ErrorSamples == 0 {
		c.ErrorSamples = DefaultErrorSamples
	}
	if c.ErrorSampleLen == 0 {
		c.ErrorSampleLen = DefaultErrorSampleLen
	}
	return c
}

// validate reports the first invalid field of c, as "Alerts.<field> ...".
func (c AlertConfig) validate() error {
	if c.OnAlert == nil {
		if c.DegradedRate != 0 || c.DegradedMinCalls != 0 || c.Interval != 0 || c.ErrorSamples != 0 ||
			c.ErrorSampleLen != 0 || len(c.Tiers) > 0 {
			return fmt.Errorf("%w: Alerts: fields are set but Alerts.OnAlert is nil (alerts off)", ErrInvalidConfig)
		}
		return nil
	}
	e := c.withDefaults()
	switch {
	case math.IsNaN(e.DegradedRate) || e.DegradedRate <= 0 || e.DegradedRate > 1:
		return invalid("Alerts.DegradedRate %v must be in (0, 1]", c.DegradedRate)
	case e.DegradedMinCalls < 0:
		return invalid("Alerts.DegradedMinCalls %d must not be negative", c.DegradedMinCalls)
	case e.Interval < 0:
		return invalid("Alerts.Interval %v must not be negative", c.Interval)
	case e.ErrorSamples < 0:
		return invalid("Alerts.ErrorSamples %d must not be negative", c.ErrorSamples)
	case e.ErrorSampleLen < 0:
		return invalid("Alerts.ErrorSampleLen %d must not be negative", c.ErrorSampleLen)
	}
	for i, t := range e.Tiers {
		switch {
		case t.Name == "":
			return invalid("Alerts.Tiers[%d].Name must not be empty", i)
		case t.After <= 0:
			return invalid("Alerts.Tiers[%d].After %v must be positive", i, t.After)
		case i > 0 && t.After <= e.Tiers[i-1].After:
			return invalid("Alerts.Tiers[%d].After %v must be greater than Tiers[%d].After %v", i, t.After, i-1, e.Tiers[i-1].After)
		case slices.ContainsFunc(e.Tiers[:i], func(p AlertTier) bool { return p.Name == t.Name }):
			return invalid("Alerts.Tiers[%d].Name %q is used twice", i, t.Name)
		}
	}
	return nil
}

// AlertKind says what an Alert reports.
type AlertKind uint8

// The kinds of alert.
const (
	AlertOpen            AlertKind = iota // a breaker has been out of the closed state for a tier's After
	AlertResolved                         // a breaker that had fired a tier closed again
	AlertDegraded                         // a command's degraded rate rose above DegradedRate
	AlertDegradedCleared                  // it fell back to DegradedRate or below
)

// String returns "breaker_open", "breaker_resolved", "degraded" or
// "degraded_cleared".
func (k AlertKind) String() string {
	switch k {
	case AlertOpen:
		return "breaker_open"
	case AlertResolved:
		return "breaker_resolved"
	case AlertDegraded:
		return "degraded"
	case AlertDegradedCleared:
		return "degraded_cleared"
	}
	return fmt.Sprintf("AlertKind(%d)", uint8(k))
}

// ErrorSample is the text of one error a command's call failed with.
type ErrorSample struct {
	At  time.Duration // the group's clock when the call ended
	Err string        // the error's text, at most ErrorSampleLen bytes
}

// Alert is one alert of a group. Command is "" for the group's own breaker.
type Alert struct {
	Kind           AlertKind
	Group, Command string
	// Tier is the tier reached (AlertOpen) or the highest reached during
	// the outage (AlertResolved); "" for the degraded alarm.
	Tier string
	// OpenFor is how long the breaker has been out of the closed state (at
	// AlertResolved: how long it was). Zero for the degraded alarm.
	OpenFor time.Duration
	// State is the breaker's state now.
	State circuit.State
	// Reason and Health are the trip's: why the breaker left the closed
	// state and its window (counts and ratios) then.
	Reason circuit.Reason
	Health circuit.Health
	// Calls and DegradedRate are the command's window now (degraded
	// alarm): its calls and the share answered by a fallback.
	Calls        int64
	DegradedRate float64
	// Errors are the last error samples, oldest first: for a breaker alert
	// those kept when the outage was first seen (the failures that tripped
	// it), for the degraded alarm the latest.
	Errors []ErrorSample
}

// errorRing keeps the last errors of a command or group. It is written only
// on failures.
type errorRing struct {
	mu     sync.Mutex
	buf    []ErrorSample
	next   int // where the next sample goes
	full   bool
	maxLen int
}

func newErrorRing(size, maxLen int) *errorRing {
	return &errorRing{buf: make([]ErrorSample, size), maxLen: maxLen}
}

// add keeps text, a sample made by sampleText.
func (r *errorRing) add(at time.Duration, text string) {
	if len(r.buf) == 0 {
		return
	}
	r.mu.Lock()
	r.buf[r.next] = ErrorSample{At: at, Err: text}
	r.next = (r.next + 1) % len(r.buf)
	r.full = r.full || r.next == 0
	r.mu.Unlock()
}

// sampleText returns err's text, cut to maxLen bytes at a character
// boundary.
func sampleText(err error, maxLen int) string {
	text := err.Error()
	if len(text) > maxLen {
		cut := maxLen
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	return text
}

// samples returns the samples kept, oldest first.
func (r *errorRing) samples() []ErrorSample {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return slices.Clone(r.buf[:r.next])
	}
	return append(slices.Clone(r.buf[r.next:]), r.buf[:r.next]...)
}

// outage is a breaker seen out of the closed state.
type outage struct {
	since  time.Duration // breaker clock: when it left the closed state
	reason circuit.Reason
	health circuit.Health
	tier   int // index of the highest tier fired; -1 for none
	errors []ErrorSample
}

// alerter evaluates a group's alerts. evalMu serialises evaluations and the
// deliveries they make; mu guards the state, which Snapshot reads too.
type alerter struct {
	cfg    AlertConfig // effective
	errors *errorRing  // the group's
	evalMu sync.Mutex
	mu     sync.Mutex
	open   map[*circuit.Breaker]*outage
	slow   map[*commandState]bool // degraded alarm raised
	stop   chan struct{}
	done   chan struct{}
}

func newAlerter(cfg AlertConfig) *alerter {
	return &alerter{cfg: cfg, errors: newErrorRing(cfg.ErrorSamples, cfg.ErrorSampleLen),
		open: map[*circuit.Breaker]*outage{}, slow: map[*commandState]bool{}}
}

// startAlerts starts the group's alert goroutine, if alerts are on.
func (g *Group) startAlerts() {
	a := g.alerts
	if a == nil {
		return
	}
	a.stop, a.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(a.done)
		t := time.NewTicker(a.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-a.stop:
				return
			case <-t.C:
				g.CheckAlerts()
			}
		}
	}()
}

// stopAlerts stops the alert goroutine and waits for it.
func (g *Group) stopAlerts() {
	if a := g.alerts; a != nil && a.stop != nil {
		close(a.stop)
		<-a.done
	}
}

// recordError keeps a failed call's error for alerts (FAILURE or TIMEOUT
// only: the calls that reached the dependency).
func (c *commandState) recordError(now time.Duration, e metrics.Event, err error) {
	if c.errors == nil || err == nil || (e != metrics.Failure && e != metrics.Timeout) {
		return
	}
	text := sampleText(err, c.errors.maxLen) // one text for the command's ring and the group's
	c.errors.add(now, text)
	c.group.alerts.errors.add(now, text)
}

// CheckAlerts evaluates the group's alerts now (see AlertConfig) and
// delivers those due. The group's goroutine calls it every
// AlertConfig.Interval; call it yourself to evaluate at once, such as in a
// test on a manual clock. It does nothing when alerts are off. Safe for
// concurrent use: evaluations are serialised, so each alert fires once.
func (g *Group) CheckAlerts() {
	a := g.alerts
	if a == nil {
		return
	}
	a.evalMu.Lock()
	defer a.evalMu.Unlock()
	// Read the breakers and windows before taking a.mu: a breaker's
	// Snapshot may report a transition, and its OnTransition may read the
	// group's Snapshot, which takes a.mu.
	now := g.clock.Now()
	t := g.commands.Load()
	cmds := t.names.byNameOrder()
	views := make([]alertView, 0, 1+len(cmds))
	views = append(views, alertView{b: g.breaker, s: g.breaker.Snapshot(), ring: a.errors})
	for _, c := range cmds {
		views = append(views, alertView{c: c, b: c.breaker, s: c.breaker.Snapshot(), ring: c.errors,
			counts: c.metrics.Counts(now)})
	}
	a.mu.Lock()
	var out []Alert
	for i := range views {
		out = a.checkBreaker(out, g.name, &views[i])
		if views[i].c != nil {
			out = a.checkDegraded(out, &views[i])
		}
	}
	a.mu.Unlock()
	for _, al := range out {
		g.deliverAlert(al)
	}
}

// alertView is what one evaluation read of a breaker and, for a command
// (c set), its window.
type alertView struct {
	c      *commandState // nil for the group's breaker
	b      *circuit.Breaker
	s      circuit.Snapshot
	ring   *errorRing
	counts metrics.Counts
}

// checkBreaker appends the alerts of breaker v.b, as read in v, to out.
// a.mu is held.
func (a *alerter) checkBreaker(out []Alert, group string, v *alertView) []Alert {
	cmd := ""
	if v.c != nil {
		cmd = v.c.name
	}
	s, b := v.s, v.b
	o := a.open[b]
	if s.State == circuit.Closed || s.Mode == circuit.ForcedOpen {
		if o != nil {
			delete(a.open, b)
			out = a.resolved(out, group, cmd, s, o)
		}
		return out
	}
	// The breaker's clock now, and the outage as its history tells it.
	clock := breakerNow(s)
	seen := outage{since: clock - s.Since, reason: s.LastReason, health: s.Health, tier: -1}
	found := false
	for i := len(s.Transitions) - 1; i >= 0; i-- {
		if tr := s.Transitions[i]; tr.From == circuit.Closed {
			seen.since, seen.reason, seen.health, found = tr.At, tr.Reason, tr.Health, true
			break
		}
	}
	if o != nil && found && seen.since != o.since {
		out = a.resolved(out, group, cmd, s, o) // it closed and tripped again between two checks
		o = nil
	}
	if o == nil {
		seen.errors = v.ring.samples()
		o = &seen
		a.open[b] = o
	}
	openFor := clock - o.since
	tier := -1
	for i, t := range a.cfg.Tiers {
		if openFor >= t.After {
			tier = i
		}
	}
	if tier > o.tier {
		o.tier = tier
		out = append(out, Alert{Kind: AlertOpen, Group: group, Command: cmd, Tier: a.cfg.Tiers[tier].Name,
			OpenFor: openFor, State: s.State, Reason: o.reason, Health: o.health, Errors: o.errors})
	}
	return out
}

// resolved appends the AlertResolved of outage o, if it fired a tier.
func (a *alerter) resolved(out []Alert, group, cmd string, s circuit.Snapshot, o *outage) []Alert {
	if o.tier < 0 {
		return out
	}
	end := breakerNow(s) // unless a transition says when it closed
	for _, tr := range s.Transitions {
		if tr.At >= o.since && tr.To == circuit.Closed {
			end = tr.At
			break
		}
	}
	return append(out, Alert{Kind: AlertResolved, Group: group, Command: cmd, Tier: a.cfg.Tiers[o.tier].Name,
		OpenFor: end - o.since, State: s.State, Reason: o.reason, Health: o.health, Errors: o.errors})
}

// breakerNow returns the instant of the breaker's clock at which s was
// taken: its last transition's, plus the time since.
func breakerNow(s circuit.Snapshot) time.Duration {
	now := s.Since
	if n := len(s.Transitions); n > 0 {
		now += s.Transitions[n-1].At
	}
	return now
}

// checkDegraded appends the degraded alarm of the command v.c, if it is
// raised or cleared now. a.mu is held.
func (a *alerter) checkDegraded(out []Alert, v *alertView) []Alert {
	c := v.c
	calls, rate := degradedRate(v.counts)
	raised := a.slow[c]
	kind := AlertDegraded
	switch {
	case !raised && calls >= int64(a.cfg.DegradedMinCalls) && rate > a.cfg.DegradedRate:
		a.slow[c] = true
	case raised && rate <= a.cfg.DegradedRate:
		delete(a.slow, c)
		kind = AlertDegradedCleared
	default:
		return out
	}
	return append(out, Alert{Kind: kind, Group: c.group.name, Command: c.name, State: v.s.State,
		Calls: calls, DegradedRate: rate, Errors: c.errors.samples()})
}

// tierOf returns the tier breaker b has reached, "" if none.
func (a *alerter) tierOf(b *circuit.Breaker) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if o := a.open[b]; o != nil && o.tier >= 0 {
		return a.cfg.Tiers[o.tier].Name
	}
	return ""
}

// degradedAlarm reports whether c's degraded alarm is raised.
func (a *alerter) degradedAlarm(c *commandState) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.slow[c]
}

// deliverAlert logs al (Warn when raised, Info when resolved or cleared)
// and hands it to OnAlert, recovering a panic there.
func (g *Group) deliverAlert(al Alert) {
	level := slog.LevelWarn
	if al.Kind == AlertResolved || al.Kind == AlertDegradedCleared {
		level = slog.LevelInfo
	}
	errs := make([]string, len(al.Errors))
	for i, e := range al.Errors {
		errs[i] = e.Err
	}
	g.logger.LogAttrs(context.Background(), level, "bulwark alert",
		slog.String("kind", al.Kind.String()),
		slog.String("group", al.Group),
		slog.String("command", al.Command),
		slog.String("tier", al.Tier),
		slog.Duration("open_for", al.OpenFor),
		slog.String("state", al.State.String()),
		slog.String("reason", string(al.Reason)),
		slog.Int64("requests", al.Health.Requests),
		slog.Float64("error_ratio", al.Health.ErrorRatio),
		slog.Float64("slow_ratio", al.Health.SlowRatio),
		slog.Int64("calls", al.Calls),
		slog.Float64("degraded_rate", al.DegradedRate),
		slog.Any("errors", errs),
	)
	defer g.recoverHook("OnAlert") // the alert's own record above names its kind
	g.alerts.cfg.OnAlert(al)
}
