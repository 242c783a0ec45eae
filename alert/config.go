package alert

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/bulwark-go/bulwark/command"
)

// Defaults of Config.
const (
	DefaultInterval         = time.Second
	DefaultDegradedRate     = 0.05
	DefaultDegradedMinCalls = 20
	DefaultErrorSamples     = 5
	DefaultErrorSampleLen   = 200
)

// Tier is one step of escalation: a breaker that has not been closed for
// After is an incident of this tier.
type Tier struct {
	Name  string        // such as "P3"; shown in alerts and on the dashboard
	After time.Duration // how long the breaker has been out of the closed state
}

// DefaultTiers returns the tiers used when Config.Tiers is empty, from an
// incident review: open 1 minute is P3 (record, no page), 10 minutes P2
// (page on-call), 30 minutes P1 (escalate, involve the downstream team).
// 80% of that team's downstream faults healed within 10 minutes, and paging
// at 1 minute caused 20 pages a week for 3 real faults.
func DefaultTiers() []Tier {
	return []Tier{{"P3", time.Minute}, {"P2", 10 * time.Minute}, {"P1", 30 * time.Minute}}
}

// Config configures a Watcher. Every field is optional.
type Config struct {
	// OnAlert receives every alert, in order, never concurrently with
	// itself, after it is logged (with the group's logger: Warn when
	// raised, Info when resolved or cleared). It may read a group
	// (Snapshot) but must not call Check or close a watched group: the
	// group's Close waits for a delivery in progress. A panic in it is
	// recovered and logged. nil: alerts are only logged.
	OnAlert func(Alert)
	// Tiers are the escalation steps, in increasing After, with distinct
	// non-empty names. Each outage fires each tier it reaches once; if an
	// evaluation finds several newly reached (a breaker already long open
	// when alerts start), only the highest fires. Default DefaultTiers().
	Tiers []Tier
	// DegradedRate is the degraded share (calls answered by a fallback /
	// calls, over the command's window) above which a command's degraded
	// alarm fires (Degraded), once; it clears (DegradedCleared) once the
	// share is back at or below it. In (0, 1]; default 0.05.
	DegradedRate float64
	// DegradedMinCalls is how many calls the window must hold before the
	// degraded alarm can fire: one degraded call of one is not an
	// incident. Default 20.
	DegradedMinCalls int
	// Interval is how often alerts are evaluated. A tier fires within
	// about Interval of being reached. Default 1 s.
	Interval time.Duration
	// ErrorSamples is how many of the last errors (FAILURE and TIMEOUT
	// causes) each command and each group keep for alerts: a ring of that
	// many, written on failures only, never more. At most 1000; default 5.
	ErrorSamples int
	// ErrorSampleLen bounds each sample's error text and request ID, in
	// bytes (cut at a character boundary). Only error text is kept, never
	// values or payloads. At most 65536; default 200.
	ErrorSampleLen int
	// RequestID, if set, returns the request ID of a failed call, read
	// from the ctx the caller passed to Execute (such as a value its HTTP
	// middleware stored there, or a trace ID), kept in the call's
	// ErrorSample so that an alert names requests to look up in the logs.
	// It runs on the caller's goroutine, on failures only (FAILURE and
	// TIMEOUT), so it must be quick, must not block and must not keep ctx;
	// "" when the call has none. A panic in it is recovered (the sample
	// keeps no ID) and logged once. nil: samples carry no request ID.
	RequestID func(ctx context.Context) string
}

// Bounds of Config's sample sizes.
const (
	maxErrorSamples   = 1000
	maxErrorSampleLen = 1 << 16
)

// withDefaults returns c with its defaults applied.
func (c Config) withDefaults() Config {
	if len(c.Tiers) == 0 {
		c.Tiers = DefaultTiers()
	}
	if c.DegradedRate == 0 {
		c.DegradedRate = DefaultDegradedRate
	}
	if c.DegradedMinCalls == 0 {
		c.DegradedMinCalls = DefaultDegradedMinCalls
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.ErrorSamples == 0 {
		c.ErrorSamples = DefaultErrorSamples
	}
	if c.ErrorSampleLen == 0 {
		c.ErrorSampleLen = DefaultErrorSampleLen
	}
	return c
}

// validate reports the first invalid field of c, by name and value.
func (c Config) validate() error {
	e := c.withDefaults()
	switch {
	case math.IsNaN(e.DegradedRate) || e.DegradedRate <= 0 || e.DegradedRate > 1:
		return invalid("DegradedRate %v must be in (0, 1]", c.DegradedRate)
	case e.DegradedMinCalls < 0:
		return invalid("DegradedMinCalls %d must not be negative", c.DegradedMinCalls)
	case e.Interval < 0:
		return invalid("Interval %v must not be negative", c.Interval)
	case e.ErrorSamples < 0 || e.ErrorSamples > maxErrorSamples:
		return invalid("ErrorSamples %d must be in [0, %d]", c.ErrorSamples, maxErrorSamples)
	case e.ErrorSampleLen < 0 || e.ErrorSampleLen > maxErrorSampleLen:
		return invalid("ErrorSampleLen %d must be in [0, %d]", c.ErrorSampleLen, maxErrorSampleLen)
	}
	for i, t := range e.Tiers {
		switch {
		case t.Name == "":
			return invalid("Tiers[%d].Name must not be empty", i)
		case t.After <= 0:
			return invalid("Tiers[%d].After %v must be positive", i, t.After)
		case i > 0 && t.After <= e.Tiers[i-1].After:
			return invalid("Tiers[%d].After %v must be greater than Tiers[%d].After %v", i, t.After, i-1, e.Tiers[i-1].After)
		case slices.ContainsFunc(e.Tiers[:i], func(p Tier) bool { return p.Name == t.Name }):
			return invalid("Tiers[%d].Name %q is used twice", i, t.Name)
		}
	}
	return nil
}

// invalid returns a configuration error wrapping command.ErrInvalidConfig.
func invalid(format string, args ...any) error {
	return fmt.Errorf("alert: %w: "+format, append([]any{command.ErrInvalidConfig}, args...)...)
}

// Kind says what an Alert reports.
type Kind uint8

// The kinds of alert.
const (
	Open            Kind = iota // a breaker has been out of the closed state for a tier's After
	Resolved                    // a breaker that had fired a tier closed again
	Degraded                    // a command's degraded rate rose above DegradedRate
	DegradedCleared             // it fell back to DegradedRate or below
)

// String returns "breaker_open", "breaker_resolved", "degraded" or
// "degraded_cleared".
func (k Kind) String() string {
	switch k {
	case Open:
		return "breaker_open"
	case Resolved:
		return "breaker_resolved"
	case Degraded:
		return "degraded"
	case DegradedCleared:
		return "degraded_cleared"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// level is the level an alert of kind k is logged at.
func (k Kind) level() slog.Level {
	if k == Resolved || k == DegradedCleared {
		return slog.LevelInfo
	}
	return slog.LevelWarn
}
