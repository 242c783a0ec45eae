package httpguard

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// DefaultMaxHosts is the default of Config.MaxHosts.
const DefaultMaxHosts = 1000

// ErrTooManyHosts is the error of a request to a new host when the
// Transport already has Config.MaxHosts groups open.
var ErrTooManyHosts = errors.New("httpguard: too many hosts")

// Config configures a Transport. Every field is optional.
type Config struct {
	// Base performs the requests. Default http.DefaultTransport.
	Base http.RoundTripper
	// Group is the configuration of the group a host gets on its first
	// request (see GroupName for its name). A group that already exists in
	// the registry under that name is used as is, so one host can be given
	// its own settings by creating its group first. A limiter in
	// Group.RateLimit is shared by every host that gets this configuration:
	// one limit for all of them.
	Group command.GroupConfig
	// Degrade answers a request that never left because the Transport
	// refused it (a breaker short-circuited it, the bulkhead rejected it,
	// it timed out in the group's queue, the client-side throttle,
	// Group.Throttle, refused it, or it was a write, any method but GET,
	// HEAD, OPTIONS and TRACE, in a read-only group) with a synthetic 503
	// response instead of an error: a Retry-After header (the breaker's
	// remaining open time in seconds, rounded up, at least 1) and
	// X-Degraded with the reason, the event's label ("short_circuited",
	// "thread_pool_rejected", "semaphore_rejected", "queue_timeout",
	// "throttled", "read_only"; see docs/events.md).
	// A request a rate limiter refused (Group.RateLimit, RATE_LIMITED) gets
	// 429 Too Many Requests instead, its Retry-After the limiter's delay
	// (rounded up, at least 1 s) and X-Degraded "rate_limited".
	// Such a response is a fallback value: FALLBACK_SUCCESS, Info.Degraded.
	Degrade bool
	// DegradeServerErrors replaces a 5xx response (still a FAILURE for the
	// breakers) with the same synthetic 503, X-Degraded "failure" and the
	// upstream's Retry-After (rounded up to whole seconds), or 1 without
	// one; the upstream response is closed unread. Default: the
	// 5xx response is returned to the caller as it came, body and headers
	// (Retry-After...) included, as an http.RoundTripper must; its metrics
	// are those of a failure that got no fallback value (FAILURE,
	// FALLBACK_MISSING, EXCEPTION_THROWN), since the command's caller is
	// the Transport.
	DegradeServerErrors bool
	// MaxHosts bounds the groups the Transport creates that are open at
	// once: a request to a new host beyond it gets an error matching
	// ErrTooManyHosts (and one log record, the first time), so that host
	// names taken from request data cannot make it create groups without
	// end. A host whose group was closed no longer counts. Groups that
	// existed before the Transport's first request to their host do not
	// count. Default DefaultMaxHosts (1,000).
	MaxHosts int
	// CommandName names the command of a request within its host's group.
	// Default: the request's method ("GET").
	CommandName func(*http.Request) string
	// Logger receives the Transport's log record. Default: the registry's
	// logger.
	Logger *slog.Logger
}

// Transport is an http.RoundTripper that runs each request as a command in
// a group per host, so that a failing host is short-circuited and bounded
// without touching the others. Create it with NewTransport; it is safe for
// concurrent use.
//
// The groups live in the registry: a host's group is the registry's group
// named GroupName(req.URL), created on the host's first request with
// Config.Group (through Registry.GroupOrNew, so concurrent first requests
// share one group). A group that is closed leaves the registry, and the
// host's next request gets a new group. Once the registry is closed, a
// request to a host without a group gets an error matching
// command.ErrClosed.
//
// Outcomes: a network error, a timeout (the group's timeout bounds the wait
// for the response headers; reading the body is up to the caller) and a 5xx
// response are failures. A 5xx response is returned as is with a nil error
// (unless DegradeServerErrors): the breakers count a FAILURE, the caller
// reads the upstream's answer. A 4xx response is a bad request, returned as
// is and not counted by the breakers; this includes 429 Too Many Requests,
// which tells of a rate limit rather than of the host's health, and so
// counts neither as a failure nor as a success. 1xx-3xx responses are
// successes. A request that got no response (network error, timeout,
// short-circuited, rejected, timed out in the queue) gets an error (a
// *command.Error), or with Degrade the degraded 503 response for the
// refusals.
// Every response the caller does not get (one that came after the deadline,
// or a replaced 5xx) is closed by the Transport, once.
//
// Retries: with Config.Group.Retry set, a request with a safe method (GET,
// HEAD, OPTIONS, TRACE) and no body is idempotent, and its network errors,
// timeouts and 5xx responses are retried as retry.Config says,
// honouring a 5xx's Retry-After; the caller gets the last attempt's
// response. Other requests are never retried.
type Transport struct {
	reg    *command.Registry
	base   http.RoundTripper
	cfg    Config
	logger *slog.Logger

	mu        sync.Mutex          // serialises the creation of groups
	hosts     map[string]struct{} // groups created, open or closed (pruned at MaxHosts)
	capLogged bool                // MaxHosts was reached and said so
}

// NewTransport returns a Transport that keeps its groups in reg. The error
// wraps command.ErrInvalidConfig when cfg.Group or cfg.MaxHosts is invalid.
func NewTransport(reg *command.Registry, cfg Config) (*Transport, error) {
	if reg == nil {
		return nil, fmt.Errorf("%w: httpguard: NewTransport needs a registry (command.NewRegistry)", command.ErrInvalidConfig)
	}
	if err := cfg.Group.Validate(); err != nil {
		return nil, fmt.Errorf("httpguard: Config.Group: %w", err)
	}
	if cfg.MaxHosts < 0 {
		return nil, fmt.Errorf("%w: httpguard: Config.MaxHosts %d must not be negative", command.ErrInvalidConfig, cfg.MaxHosts)
	}
	if cfg.MaxHosts == 0 {
		cfg.MaxHosts = DefaultMaxHosts
	}
	t := &Transport{reg: reg, base: cfg.Base, cfg: cfg, logger: cfg.Logger, hosts: map[string]struct{}{}}
	if t.base == nil {
		t.base = http.DefaultTransport
	}
	if t.logger == nil {
		t.logger = reg.Config().Logger
	}
	return t, nil
}

// Group returns the group that serves requests to u, creating it if needed
// (see Transport). The error matches ErrTooManyHosts when MaxHosts groups
// are open, and command.ErrClosed once the registry is closed.
func (t *Transport) Group(u *url.URL) (*command.Group, error) {
	name, err := GroupName(u)
	if err != nil {
		return nil, err
	}
	if g, ok := t.reg.Group(name); ok {
		return g, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, known := t.hosts[name]; !known && len(t.hosts) >= t.cfg.MaxHosts {
		maps.DeleteFunc(t.hosts, func(host string, _ struct{}) bool {
			_, open := t.reg.Group(host)
			return !open
		})
		if len(t.hosts) >= t.cfg.MaxHosts {
			if !t.capLogged {
				t.capLogged = true
				t.logger.Warn("httpguard: host limit reached: requests to new hosts are refused",
					slog.Int("max_hosts", t.cfg.MaxHosts), slog.String("host", name))
			}
			return nil, fmt.Errorf("%w: host %s refused: %d hosts have groups (Config.MaxHosts)", ErrTooManyHosts, name, t.cfg.MaxHosts)
		}
	}
	g, err := t.reg.GroupOrNew(name, t.cfg.Group)
	if err != nil {
		return nil, fmt.Errorf("httpguard: %w", err)
	}
	t.hosts[name] = struct{}{}
	return g, nil
}

// RoundTrip runs req as a command in the group of req.URL's host.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := &call{base: t.base, req: req}
	defer c.closeUnsent()
	g, err := t.Group(req.URL)
	if err != nil {
		return nil, err
	}
	name := req.Method
	if t.cfg.CommandName != nil {
		name = t.cfg.CommandName(req)
	}
	var resp *http.Response
	if t.cfg.Degrade || t.cfg.DegradeServerErrors {
		resp, err = command.Execute(req.Context(), g, degradingCall{c, t.cfg.Degrade, t.cfg.DegradeServerErrors}, command.WithName(name))
	} else {
		resp, err = command.Execute(req.Context(), g, c, command.WithName(name))
	}
	upstream := c.take()
	var e *command.Error
	switch {
	case err == nil:
	case resp != nil && command.IsBadRequest(err):
		return resp, nil // a 4xx: the caller reads it like any response
	case upstream != nil && errors.As(err, &e) && e.Event == metrics.Failure:
		return upstream, nil // a 5xx, passed through
	}
	if upstream != nil {
		upstream.Body.Close() // a 5xx that came too late, or that the degraded answer replaced
	}
	return resp, err
}

// statusError is the error of a response that the Transport counts as a
// failure (5xx) or classifies as a bad request (4xx). It is the cause the
// breakers and a fallback see; RoundTrip's caller gets the response itself.
// A 5xx's Retry-After header is its RetryAfterDelay method,
// which a retry honours (retry.Config) and command.Error.RetryAfter
// reports.
type statusError struct {
	status     string
	retryAfter time.Duration
}

func (e *statusError) Error() string { return "http status " + e.status }

// RetryAfterDelay returns the delay the response's Retry-After header asked
// for, or 0.
func (e *statusError) RetryAfterDelay() time.Duration { return e.retryAfter }
