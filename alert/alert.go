package alert

import (
	"slices"
	"time"
	"unicode/utf8"

	"github.com/bulwark-go/bulwark/circuit"
)

// Alert is one alert of a group. Command is "" for the group's own breaker.
type Alert struct {
	Kind           Kind
	Group, Command string
	// Tier is the tier reached (Open) or the highest reached during the
	// outage (Resolved); for the degraded alarm, the first (lowest) tier,
	// so that it is routed as that tier is (P3 by default, as
	// prom/alerts.yml's BulwarkCommandDegraded).
	Tier string
	// OpenFor is how long the breaker has been out of the closed state (at
	// Resolved: how long it was). Zero for the degraded alarm.
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
	// Unwatched marks the Resolved or DegradedCleared that Watcher.Unwatch
	// sends for what still fired when the group was closed: the alert ends
	// because nobody watches the group any more, not because its
	// dependency recovered. OpenFor is then the outage's length at the
	// last evaluation.
	Unwatched bool
}

// ErrorSample is the text of one error a command's call failed with.
type ErrorSample struct {
	At  time.Duration // the group's clock when the call ended
	Err string        // the error's text, at most Config.ErrorSampleLen bytes
	// RequestID is what Config.RequestID read from the call's ctx (at
	// most Config.ErrorSampleLen bytes); "" without Config.RequestID.
	RequestID string
}

// line is e as one line of text: "request <id>: <error>", or the error
// alone without an ID.
func (e ErrorSample) line() string {
	if e.RequestID == "" {
		return e.Err
	}
	return "request " + e.RequestID + ": " + e.Err
}

// ring keeps the last errors of a command or group. Its group's mutex
// guards it.
type ring struct {
	buf  []ErrorSample
	next int // where the next sample goes
	full bool
}

func newRing(size int) *ring { return &ring{buf: make([]ErrorSample, size)} }

// add keeps e, replacing the oldest sample once the ring is full.
func (r *ring) add(e ErrorSample) {
	if len(r.buf) == 0 {
		return
	}
	r.buf[r.next] = e
	r.next = (r.next + 1) % len(r.buf)
	r.full = r.full || r.next == 0
}

// samples returns the samples kept, oldest first; none for a nil ring.
func (r *ring) samples() []ErrorSample {
	switch {
	case r == nil:
		return nil
	case !r.full:
		return slices.Clone(r.buf[:r.next])
	}
	return append(slices.Clone(r.buf[r.next:]), r.buf[:r.next]...)
}

// cut returns text cut to maxLen bytes at a character boundary.
func cut(text string, maxLen int) string {
	if len(text) > maxLen {
		cut := maxLen
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	return text
}
