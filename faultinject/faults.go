package faultinject

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// ErrInjected is matched (errors.Is) by every *Error: an error that
// exists only because a fault was injected.
var ErrInjected = errors.New("faultinject: injected fault")

// Fault names a kind of injected failure.
type Fault string

// The faults an *Error reports.
const (
	FaultError Fault = "error" // Config.ErrorShare
	FaultReset Fault = "reset" // Config.ResetShare: matches syscall.ECONNRESET
	FaultEOF   Fault = "eof"   // Config.EOFShare: matches io.ErrUnexpectedEOF
	FaultDNS   Fault = "dns"   // Config.DNSShare: wrapped by the *net.DNSError it explains
)

// Error is an injected failure. It matches ErrInjected and, through
// Unwrap, its Err.
type Error struct {
	// Fault is the kind of fault.
	Fault Fault
	// Err is the cause it imitates: Config.Err, syscall.ECONNRESET or
	// io.ErrUnexpectedEOF; nil for a FaultError without Config.Err and
	// for FaultDNS, whose *Error sits at the end of the chain, below the
	// *net.DNSError that imitates the failure.
	Err error
}

// Error says which fault was injected, and its cause.
func (e *Error) Error() string {
	if e.Err == nil {
		return "faultinject: injected " + string(e.Fault)
	}
	return "faultinject: injected " + string(e.Fault) + ": " + e.Err.Error()
}

// Unwrap returns e.Err.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is ErrInjected.
func (e *Error) Is(target error) bool { return target == ErrInjected }

// Faults holds the live fault settings shared by the wrappers built on it
// (Command, NewTransport). It is safe for concurrent use: a drill switches
// it on and off (Enable, Disable) and changes it (Set) while calls go
// through, and each change applies from the next call on; a call already
// delayed or hanging keeps its fault.
//
// The zero Faults holds the zero Config, which injects nothing. A nil
// *Faults injects nothing either, so code can hold one that is set only when
// a drill is configured.
type Faults struct {
	enabled atomic.Bool
	live    atomic.Pointer[live]

	mu      sync.Mutex    // guards changed
	changed chan struct{} // closed by the next Enable, Disable or Set; nil until asked for
}

// live is one Set's configuration with its own random source.
type live struct {
	cfg Config
	mu  sync.Mutex // guards rng
	rng *rand.Rand
}

// New returns Faults with cfg, disabled: no fault is injected before
// Enable. It returns an error wrapping ErrInvalidConfig if cfg is invalid.
func New(cfg Config) (*Faults, error) {
	f := new(Faults)
	if err := f.Set(cfg); err != nil {
		return nil, err
	}
	return f, nil
}

// Set replaces the configuration for the next calls and restarts the
// random sequence from cfg.Seed; it leaves Enabled unchanged. If cfg is
// invalid it returns an error wrapping ErrInvalidConfig and leaves f
// unchanged.
func (f *Faults) Set(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	f.live.Store(&live{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed))})
	f.notify()
	return nil
}

// Config returns the configuration in force (the zero Config for a nil or
// zero Faults).
func (f *Faults) Config() Config {
	if f == nil || f.live.Load() == nil {
		return Config{}
	}
	return f.live.Load().cfg
}

// Enable starts injecting faults from the next call on.
func (f *Faults) Enable() {
	f.enabled.Store(true)
	f.notify()
}

// Disable stops injecting faults from the next call on, and frees the
// connections PoolHeld holds: requests waiting for one go on. Disabled
// calls draw nothing from the random sequence.
func (f *Faults) Disable() {
	f.enabled.Store(false)
	f.notify()
}

// changes returns a channel that the next Enable, Disable or Set closes.
// Take it before reading the state it guards, so that no change is missed.
func (f *Faults) changes() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.changed == nil {
		f.changed = make(chan struct{})
	}
	return f.changed
}

// notify closes the channel changes handed out.
func (f *Faults) notify() {
	f.mu.Lock()
	if f.changed != nil {
		close(f.changed)
		f.changed = nil
	}
	f.mu.Unlock()
}

// poolFree returns how many connections of a host's pool PoolHeld leaves
// free, and false when no pool is imitated (disabled, or PoolHeld zero).
func (f *Faults) poolFree() (int, bool) {
	if !f.Enabled() {
		return 0, false
	}
	l := f.live.Load()
	if l == nil || l.cfg.PoolHeld == 0 {
		return 0, false
	}
	return l.cfg.PoolSize - l.cfg.PoolHeld, true
}

// Enabled reports whether faults are injected; false for a nil *Faults.
func (f *Faults) Enabled() bool { return f != nil && f.enabled.Load() }

// outcome is the exclusive part of a decision.
type outcome uint8

const (
	pass outcome = iota
	hang
	fail
	reset
	eof
	serverError
	dnsFailure
)

// decision is what happens to one call.
type decision struct {
	cfg      *Config // the configuration it was drawn from
	outcome  outcome
	latency  time.Duration
	slowBody bool
}

// decide draws the faults of one call, or returns false when f injects
// nothing. Every enabled call draws the same number of values, so the n-th
// call after a Set gets the same faults for the same Seed whatever the
// calls before it got. Under concurrency the draws are the same but which
// call gets which depends on scheduling.
func (f *Faults) decide() (decision, bool) {
	if !f.Enabled() {
		return decision{}, false
	}
	l := f.live.Load()
	if l == nil { // a zero Faults: the zero Config injects nothing
		return decision{}, false
	}
	l.mu.Lock()
	uOutcome, uLatency, uDelay, eDelay, uSlow := l.rng.Float64(), l.rng.Float64(), l.rng.Float64(), l.rng.ExpFloat64(), l.rng.Float64()
	l.mu.Unlock()

	c := &l.cfg
	d := decision{cfg: c, slowBody: uSlow < c.SlowBodyShare}
	if uLatency < c.LatencyShare {
		d.latency = c.Latency.draw(uDelay, eDelay)
	}
	for _, o := range [...]struct {
		share float64
		o     outcome
	}{{c.HangShare, hang}, {c.ErrorShare, fail}, {c.ResetShare, reset}, {c.EOFShare, eof}, {c.ServerErrorShare, serverError}, {c.DNSShare, dnsFailure}} {
		if uOutcome < o.share {
			d.outcome = o.o
			break
		}
		uOutcome -= o.share
	}
	return d, true
}

// injectedError returns the error of a FaultError.
func (d decision) injectedError() error { return &Error{Fault: FaultError, Err: d.cfg.Err} }

// sleep waits for d, or until ctx ends and then returns ctx.Err().
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
