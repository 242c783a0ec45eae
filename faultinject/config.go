package faultinject

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"
)

// ErrInvalidConfig is wrapped by every error that New, Set and
// Config.Validate return; the message names the field and its value.
var ErrInvalidConfig = errors.New("faultinject: invalid config")

// DefaultStatusCode is the status of an injected server error when
// Config.StatusCode is zero.
const DefaultStatusCode = http.StatusServiceUnavailable

// Config says which faults to inject and how often. Its zero value injects
// nothing. A share is the probability, in [0, 1], that one call gets the
// fault. HangShare, ErrorShare, ResetShare, EOFShare, ServerErrorShare and
// DNSShare are exclusive outcomes (one draw picks at most one of them), so
// their sum must not exceed 1; LatencyShare and SlowBodyShare are drawn
// independently and combine with them. PoolHeld is not a share: while
// faults are enabled it holds connections of every host's pool.
type Config struct {
	// Seed seeds the random source. New and each Set restart the sequence
	// of draws from it: the same Seed and the same sequence of calls give
	// the same faults.
	Seed uint64

	// HangShare of calls hang until their context ends, then return
	// ctx.Err(), without reaching the dependency.
	HangShare float64
	// ErrorShare of calls fail at once with an *Error of FaultError,
	// without reaching the dependency.
	ErrorShare float64
	// Err is the cause carried by injected FaultError errors (nil: none).
	// The error returned matches both ErrInjected and Err with errors.Is.
	Err error

	// LatencyShare of calls are delayed by a draw of Latency before
	// anything else happens; the delay ends early, with ctx.Err(), when
	// the context ends.
	LatencyShare float64
	// Latency is the distribution of the injected delay.
	Latency Latency

	// The faults below concern the HTTP transport only (NewTransport);
	// Command never injects them, so the share of calls that gets them
	// passes through a command untouched.

	// ResetShare of requests fail with an *Error of FaultReset that
	// matches syscall.ECONNRESET, as a connection reset by the peer,
	// without reaching the server.
	ResetShare float64
	// EOFShare of requests fail with an *Error of FaultEOF that matches
	// io.ErrUnexpectedEOF, as a connection closed before the response
	// ended, without reaching the server.
	EOFShare float64
	// ServerErrorShare of requests get a synthetic response with
	// StatusCode, without reaching the server.
	ServerErrorShare float64
	// StatusCode of injected server errors, in 500..599; zero means
	// DefaultStatusCode (503).
	StatusCode int
	// SlowBodyShare of responses from the server have their body
	// trickled: SlowBodyChunk bytes at most per Read, each Read after a
	// SlowBodyDelay pause (ended early by the request's context).
	SlowBodyShare float64
	// SlowBodyChunk is the most bytes one Read of a slow body returns;
	// zero means 1.
	SlowBodyChunk int
	// SlowBodyDelay is the pause before each Read of a slow body.
	SlowBodyDelay time.Duration

	// DNSShare of requests fail as if the lookup of their host's name
	// had failed, without reaching the server: the error is what
	// net/http's Transport returns for a real failure, a *net.OpError
	// (Op "dial", Net "tcp") wrapping a *net.DNSError for the request's
	// host, with the same text, Timeout and Temporary as a real one; its
	// Unwrap gives an *Error of FaultDNS, so it matches ErrInjected too.
	DNSShare float64
	// DNS is the lookup failure DNSShare injects; zero means DNSNotFound.
	DNS DNSFailure

	// PoolSize and PoolHeld imitate a connection pool of PoolSize
	// connections per host (the MaxConnsPerHost of the Transport's next
	// RoundTripper) of which PoolHeld are held elsewhere, by leaked
	// response bodies or stuck requests: at most PoolSize-PoolHeld
	// requests per host hold a connection at once, and the others wait
	// for one in order, as in a real exhausted pool, until their context
	// ends. PoolHeld equal to PoolSize holds them all. Zero PoolHeld
	// imitates no pool.
	PoolSize int
	// PoolHeld is how many of PoolSize connections are held; see PoolSize.
	PoolHeld int
}

// Latency is a distribution of delays. Its zero value is no delay.
//   - Fixed: Max and Mean zero: every delay is Min.
//   - Uniform: Max set, Mean zero: uniform in [Min, Max].
//   - Exponential: Mean and Max set: Min plus an exponential draw of mean
//     Mean, capped at Max (the cap keeps a drill's tail bounded).
type Latency struct {
	Min, Max, Mean time.Duration
}

// Fixed returns a Latency of exactly d.
func Fixed(d time.Duration) Latency { return Latency{Min: d} }

// Uniform returns a Latency uniform in [lo, hi].
func Uniform(lo, hi time.Duration) Latency { return Latency{Min: lo, Max: hi} }

// Exponential returns a Latency of lo plus an exponential draw of mean
// mean, capped at hi.
func Exponential(lo, mean, hi time.Duration) Latency { return Latency{Min: lo, Mean: mean, Max: hi} }

// shareSlack absorbs rounding when shares that add up to 1 are summed
// (0.1 + 0.2 + 0.7 is 1.0000000000000002).
const shareSlack = 1e-9

// Validate returns nil if c is usable, or an error wrapping
// ErrInvalidConfig that names the first bad field and its value.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	shares := []struct {
		name string
		v    float64
	}{
		{"HangShare", c.HangShare}, {"ErrorShare", c.ErrorShare}, {"ResetShare", c.ResetShare},
		{"EOFShare", c.EOFShare}, {"ServerErrorShare", c.ServerErrorShare},
		{"LatencyShare", c.LatencyShare}, {"SlowBodyShare", c.SlowBodyShare}, {"DNSShare", c.DNSShare},
	}
	for _, s := range shares {
		if math.IsNaN(s.v) || s.v < 0 || s.v > 1 {
			return bad("%s is %v, want a share in [0, 1]", s.name, s.v)
		}
	}
	if sum := c.outcomeShares(); sum > 1+shareSlack {
		return bad("HangShare+ErrorShare+ResetShare+EOFShare+ServerErrorShare+DNSShare is %v, want at most 1", sum)
	}
	if err := c.DNS.validate(); err != nil {
		return bad("%w", err)
	}
	if c.PoolSize < 0 {
		return bad("PoolSize is %d, want >= 0", c.PoolSize)
	}
	if c.PoolHeld < 0 || c.PoolHeld > c.PoolSize {
		return bad("PoolHeld is %d, want 0..PoolSize (%d)", c.PoolHeld, c.PoolSize)
	}
	if err := c.Latency.validate(); err != nil {
		return bad("%w", err)
	}
	if c.LatencyShare > 0 && c.Latency == (Latency{}) {
		return bad("LatencyShare is %v but Latency is zero", c.LatencyShare)
	}
	if c.StatusCode != 0 && (c.StatusCode < 500 || c.StatusCode > 599) {
		return bad("StatusCode is %d, want 500..599 (or 0 for %d)", c.StatusCode, DefaultStatusCode)
	}
	if c.SlowBodyChunk < 0 {
		return bad("SlowBodyChunk is %d, want >= 0", c.SlowBodyChunk)
	}
	if c.SlowBodyDelay < 0 {
		return bad("SlowBodyDelay is %v, want >= 0", c.SlowBodyDelay)
	}
	if c.SlowBodyShare > 0 && c.SlowBodyDelay == 0 {
		return bad("SlowBodyShare is %v but SlowBodyDelay is zero", c.SlowBodyShare)
	}
	return nil
}

// outcomeShares is the share of calls that get an exclusive outcome.
func (c Config) outcomeShares() float64 {
	return c.HangShare + c.ErrorShare + c.ResetShare + c.EOFShare + c.ServerErrorShare + c.DNSShare
}

func (l Latency) validate() error {
	switch {
	case l.Min < 0:
		return fmt.Errorf("Latency.Min is %v, want >= 0", l.Min)
	case l.Max < 0:
		return fmt.Errorf("Latency.Max is %v, want >= 0", l.Max)
	case l.Mean < 0:
		return fmt.Errorf("Latency.Mean is %v, want >= 0", l.Mean)
	case l.Max != 0 && l.Max < l.Min:
		return fmt.Errorf("Latency.Max is %v, want >= Latency.Min (%v)", l.Max, l.Min)
	case l.Mean != 0 && l.Max == 0:
		return fmt.Errorf("Latency.Mean is %v but Latency.Max (its cap) is zero", l.Mean)
	}
	return nil
}

// draw returns a delay of the distribution for u uniform in [0, 1) and e
// exponential of mean 1.
func (l Latency) draw(u, e float64) time.Duration {
	switch {
	case l.Mean > 0:
		if d := float64(l.Min) + e*float64(l.Mean); d < float64(l.Max) {
			return time.Duration(d)
		}
		return l.Max
	case l.Max > 0:
		return l.Min + time.Duration(u*float64(l.Max-l.Min))
	}
	return l.Min
}
