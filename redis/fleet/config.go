package fleet

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrInvalidConfig is wrapped by every error New and Attach return for a bad
// configuration.
var ErrInvalidConfig = errors.New("fleet: invalid config")

// Defaults applied to zero fields.
const (
	DefaultPrefix       = "bulwark:fleet"
	DefaultInterval     = time.Second // one bucket of the breaker's default window (10 s / 10)
	DefaultMaxSkew      = time.Second
	DefaultMaxInstances = 256
	// DefaultTimeout is the shortest default Timeout: long enough that a
	// slow round trip on a loaded host is not declared an outage
	// (docs/fleet.md).
	DefaultTimeout = 500 * time.Millisecond
	// DefaultDegradeAfter is how many syncs in a row must fail before
	// shared state is declared degraded.
	DefaultDegradeAfter = 3
	// DefaultQuorumInstances is how many instances must see their own
	// calls failing before the fleet opens the others.
	DefaultQuorumInstances = 2
)

// Config configures a Fleet. The zero value of every field but Service and
// Addr (or Redis) means its documented default.
type Config struct {
	// Addr is the Redis server, host:port. Required unless Redis is set.
	Addr string

	// Redis, if set, is used instead of Addr to build the client (password,
	// TLS, database). Its timeouts, retries and pool size are overridden:
	// the fleet bounds every command by Timeout itself.
	Redis *redis.Options

	// Service names the service whose instances form the fleet: the first
	// part of every key. Required.
	Service string

	// Instance names this process in the fleet; it must be unique among
	// the service's instances and hold no white space. Default:
	// hostname-pid-random.
	Instance string

	// Prefix starts every key. Default "bulwark:fleet". Keys are
	// Prefix:Service:group:command:{w,s,p} with ':' and '%' in the parts
	// escaped.
	Prefix string

	// Interval is how often the fleet pushes its windows and pulls the
	// fleet's. Default: the narrowest bucket width of the breakers
	// attached before Start (one bucket), or DefaultInterval.
	Interval time.Duration

	// Timeout bounds one sync (all breakers, one pipeline) and every
	// connection attempt. Default: the larger of Interval and
	// DefaultTimeout (500 ms). Calls never wait for a sync, so a generous
	// timeout costs nothing on the call path; it only delays the
	// detection of an unreachable Redis (see DegradeAfter).
	Timeout time.Duration

	// DegradeAfter is how many syncs in a row must fail before shared
	// state is declared degraded: every breaker then judges alone, probes
	// alone, and Status says so (logged once). A single slow round trip
	// is not evidence of an outage. Default 3: with Redis gone (connection
	// refused) that is about 3 × Interval, with Redis paused about
	// 3 × Timeout. Until then each breaker keeps what the last good sync
	// told it.
	DegradeAfter int

	// Quorum is what it takes the fleet to open a breaker that has not
	// tripped on its own window (see the package doc).
	Quorum Quorum

	// MaxSkew is how far in the future a record's time stamp may lie
	// before it is rejected as clock skew. Default 1 s.
	MaxSkew time.Duration

	// MaxInstances caps how many other instances' windows a breaker sums;
	// records beyond it are ignored (and counted as rejected). Default 256.
	MaxInstances int

	// Logger receives one record when shared state degrades and one when
	// it recovers, and one per episode of rejected data. Default
	// slog.Default().
	Logger *slog.Logger

	// Now tells wall-clock time for the records' time stamps. Default
	// time.Now. Tests use it to simulate a skewed instance.
	Now func() time.Time
}

// Quorum says when the evidence of several instances opens the fleet. An
// instance counts as failing when its own window holds at least one failed
// or timed-out call and its error ratio reaches the breaker's FailureRatio
// (or, with slow-call detection on, at least one slow call and its slow
// ratio reaches SlowCallRatio).
type Quorum struct {
	// Instances is how many instances must be failing. Default 2, and at
	// least 2: one instance's bad network path never opens the others.
	Instances int

	// Ratio is the share of the fleet's recent calls (the windows of
	// every instance counted, summed, at least the breaker's MinRequests
	// of them) that must have failed or timed out. In (0, 1]. Default:
	// the breaker's FailureRatio. With slow-call detection on, slow calls
	// reaching the breaker's SlowCallRatio of the sum count too.
	Ratio float64

	// Follow makes an instance whose own recent calls are healthy (at
	// least MinRequests of them, below the breaker's ratios) open with
	// the fleet. Default false: it keeps serving, on its own evidence.
	Follow bool
}

// withDefaults returns c with defaults applied; Interval and Timeout are
// resolved at Start.
func (c Config) withDefaults() (Config, error) {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.MaxSkew == 0 {
		c.MaxSkew = DefaultMaxSkew
	}
	if c.MaxInstances == 0 {
		c.MaxInstances = DefaultMaxInstances
	}
	if c.DegradeAfter == 0 {
		c.DegradeAfter = DefaultDegradeAfter
	}
	if c.Quorum.Instances == 0 {
		c.Quorum.Instances = DefaultQuorumInstances
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Instance == "" {
		host, _ := os.Hostname()
		var r [4]byte
		if _, err := rand.Read(r[:]); err != nil {
			return c, fmt.Errorf("fleet: instance name: %w", err)
		}
		c.Instance = strings.Join(strings.Fields(host), "_") + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(r[:])
	}
	return c, nil
}

// validate reports the first invalid field of c (defaults applied).
func (c Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case c.Addr == "" && c.Redis == nil:
		return bad("Addr is empty and Redis is nil")
	case c.Service == "":
		return bad("Service must not be empty")
	case strings.ContainsFunc(c.Instance, isSpace):
		return bad("Instance %q must not contain white space", c.Instance)
	case c.Interval < 0:
		return bad("Interval %v must not be negative", c.Interval)
	case c.Interval > 0 && c.Interval < time.Millisecond:
		return bad("Interval %v is below 1ms", c.Interval)
	case c.Timeout < 0:
		return bad("Timeout %v must not be negative", c.Timeout)
	case c.MaxSkew < 0:
		return bad("MaxSkew %v must not be negative", c.MaxSkew)
	case c.MaxInstances < 0:
		return bad("MaxInstances %d must not be negative", c.MaxInstances)
	case c.DegradeAfter < 0:
		return bad("DegradeAfter %d must not be negative", c.DegradeAfter)
	case c.Quorum.Instances < 2:
		return bad("Quorum.Instances %d must be at least 2: a fleet-wide open needs more than one instance's evidence", c.Quorum.Instances)
	case math.IsNaN(c.Quorum.Ratio) || c.Quorum.Ratio < 0 || c.Quorum.Ratio > 1:
		return bad("Quorum.Ratio %v must be in (0, 1] (0: the breaker's FailureRatio)", c.Quorum.Ratio)
	}
	return nil
}

func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f'
}

// key escapes one part of a key so that parts never run into each other.
func key(part string) string {
	return strings.NewReplacer("%", "%25", ":", "%3A").Replace(part)
}
