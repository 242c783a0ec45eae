// Package fallback holds ready-made fallbacks for bulwark's commands. Embed
// one in a command and its Fallback method is promoted: command.Execute
// serves it when Run fails, times out, is rejected or short-circuited, and
// marks the answer degraded (command.Info.Degraded).
//
//   - Static serves a fixed value (a default setting).
//   - FeatureOff serves the zero value, read as "feature off".
//   - LastGood serves the last value Run stored while it is recent enough.
//
// Each declares the kind of its degraded answer (Degrader), which the
// metrics count beside FALLBACK_SUCCESS. A command that must never degrade
// embeds command.NoFallback instead.
package fallback

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// ErrInvalidConfig is wrapped by the error of NewLastGood with a bad
// argument; the message names it and its value.
var ErrInvalidConfig = errors.New("fallback: invalid config")

// Degrader is implemented by a command whose Fallback serves one kind of
// degraded answer, so that "degraded" can be told apart: a default served
// in place of data is not a feature switched off, and neither is a write
// deferred for later. Degradation returns the event that counts the kind:
// metrics.DegradedStatic, DegradedLastGood, DegradedFeatureOff or
// DegradedDeferred. Static,
// LastGood and FeatureOff implement it, so a command that embeds one
// declares its kind. The kind is counted beside FALLBACK_SUCCESS, in the
// metrics and in command.Info.Events, on every surface the events reach (the
// stream, Prometheus, the page). A fallback that returns command.ErrDeferred is
// metrics.DegradedDeferred whatever it declares. A command without
// Degrader, or whose Degradation returns another event (or panics, which
// is logged), declares no kind: its degraded answers count no kind event.
type Degrader interface {
	Degradation() metrics.Event
}

// Static is a fallback that serves a fixed value (an empty list, a default
// setting). Embed it in a command: its Fallback method is promoted. Serve
// an empty value only if callers can tell it from real data through
// command.Info.Degraded.
type Static[T any] struct {
	// Value is what Fallback returns.
	Value T
}

// Fallback returns s.Value.
func (s Static[T]) Fallback(context.Context, error) (T, error) { return s.Value, nil }

// Degradation returns metrics.DegradedStatic.
func (Static[T]) Degradation() metrics.Event { return metrics.DegradedStatic }

// FeatureOff is a fallback that turns the feature off: it serves T's zero
// value (an empty list, no recommendations) marked
// metrics.DegradedFeatureOff, so
// that callers and dashboards read it as "feature off", not as "no data".
// Embed it in a command: its Fallback method is promoted.
type FeatureOff[T any] struct{}

// Fallback returns T's zero value.
func (FeatureOff[T]) Fallback(context.Context, error) (T, error) {
	var zero T
	return zero, nil
}

// Degradation returns metrics.DegradedFeatureOff.
func (FeatureOff[T]) Degradation() metrics.Event { return metrics.DegradedFeatureOff }

// Errors of LastGood's Fallback.
var (
	// ErrNoLastGood: no value was ever stored.
	ErrNoLastGood = errors.New("fallback: no last good value")
	// ErrStale: the last good value is older than the maximum age.
	ErrStale = errors.New("fallback: last good value too old")
)

// LastGood keeps the last value a command produced, with the time it was
// stored, and serves it as a fallback while it is no older than its maximum
// age. Embed a *LastGood[T] in a command and call Store from Run on success;
// the promoted Fallback does the rest. A coalesced call that joins a flight
// of the command is answered with the value too (see "Request coalescing"
// in package command). A LastGood is safe for concurrent
// use; Store costs one small allocation, Load none.
type LastGood[T any] struct {
	maxAge time.Duration
	clock  metrics.Clock
	last   atomic.Pointer[stamped[T]]
}

type stamped[T any] struct {
	v  T
	at time.Duration
}

// NewLastGood returns an empty LastGood whose values may serve as fallback
// for maxAge after they were stored. maxAge must be positive: staleness is
// always bounded (an error wrapping ErrInvalidConfig otherwise). A nil clock
// means metrics.SystemClock().
func NewLastGood[T any](maxAge time.Duration, clock metrics.Clock) (*LastGood[T], error) {
	if maxAge <= 0 {
		return nil, fmt.Errorf("%w: LastGood maxAge %v must be positive", ErrInvalidConfig, maxAge)
	}
	if clock == nil {
		clock = metrics.SystemClock()
	}
	return &LastGood[T]{maxAge: maxAge, clock: clock}, nil
}

// Store records v as the last good value, stamped now.
func (l *LastGood[T]) Store(v T) {
	l.last.Store(&stamped[T]{v: v, at: l.clock.Now()})
}

// Load returns the last good value and its age; ok is false if none was
// stored. It ignores the maximum age.
func (l *LastGood[T]) Load() (v T, age time.Duration, ok bool) {
	s := l.last.Load()
	if s == nil {
		return v, 0, false
	}
	return s.v, l.clock.Now() - s.at, true
}

// MaxAge returns the maximum age of a value Fallback serves.
func (l *LastGood[T]) MaxAge() time.Duration { return l.maxAge }

// Fallback returns the last good value if it is at most MaxAge old. Otherwise
// it fails (FALLBACK_FAILURE) with an error matching ErrNoLastGood or ErrStale.
func (l *LastGood[T]) Fallback(context.Context, error) (T, error) {
	v, age, ok := l.Load()
	switch {
	case !ok:
		return v, ErrNoLastGood
	case age > l.maxAge:
		var zero T
		return zero, fmt.Errorf("%w: age %v, max %v", ErrStale, age, l.maxAge)
	}
	return v, nil
}

// Degradation returns metrics.DegradedLastGood.
func (*LastGood[T]) Degradation() metrics.Event { return metrics.DegradedLastGood }
