package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// TransportConfig configures a Transport. Every field is optional.
type TransportConfig struct {
	// Base performs the requests. Default http.DefaultTransport.
	Base http.RoundTripper
	// Group is the configuration of the group each host gets on its first
	// request. A group that already exists in the registry under the host's
	// name (such as "api.example.com:443" or "127.0.0.1:8080", as in
	// URL.Host) is used as is, so one host can be given its own settings.
	Group GroupConfig
	// Degrade answers a request that a breaker short-circuited, or that the
	// bulkhead rejected, with a synthetic 503 response instead of an error:
	// a Retry-After header (the breaker's remaining open time in seconds,
	// rounded up, at least 1) and X-Degraded with the reason
	// ("short_circuited", "thread_pool_rejected", "semaphore_rejected").
	// Such a response is a fallback value: FALLBACK_SUCCESS, Info.Degraded.
	Degrade bool
	// CommandName names the command of a request within its host's group.
	// Default: the request's method ("GET").
	CommandName func(*http.Request) string
}

// Transport is an http.RoundTripper that runs each request as a command in
// a group per host, so that a failing host is short-circuited and bounded
// without touching the others. Create it with NewTransport; it is safe for
// concurrent use.
//
// Outcomes: a network error, a timeout (the group's timeout bounds the wait
// for the response headers; reading the body is up to the caller) and a 5xx
// response are failures; for a 5xx, the body is drained and closed and the
// caller gets an error matching *StatusError. A 4xx response is a bad
// request, returned to the caller as is (no error) and not counted by the
// breakers; this includes 429 Too Many Requests, which tells of a rate limit
// rather than of the host's health, and so counts neither as a failure nor
// as a success. 1xx-3xx responses are successes. A request that never
// reached the host (short-circuited, rejected) gets an *Error, or the
// degraded 503 response with Degrade set; its body is closed.
type Transport struct {
	reg  *Registry
	base http.RoundTripper
	cfg  TransportConfig

	mu     sync.Mutex                        // serialises group creation
	groups atomic.Pointer[map[string]*Group] // copy on write
}

// NewTransport returns a Transport that creates its groups in reg. The error
// wraps ErrInvalidConfig when cfg.Group is invalid.
func NewTransport(reg *Registry, cfg TransportConfig) (*Transport, error) {
	if err := cfg.Group.Validate(); err != nil {
		return nil, fmt.Errorf("command: TransportConfig.Group: %w", err)
	}
	t := &Transport{reg: reg, base: cfg.Base, cfg: cfg}
	if t.base == nil {
		t.base = http.DefaultTransport
	}
	t.groups.Store(&map[string]*Group{})
	return t, nil
}

// Group returns the group of host (as in URL.Host), creating it on first
// use.
func (t *Transport) Group(host string) (*Group, error) {
	if g := (*t.groups.Load())[host]; g != nil {
		return g, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.groups.Load()
	if g := old[host]; g != nil {
		return g, nil
	}
	g, err := t.reg.GroupOrNew(host, t.cfg.Group)
	if err != nil {
		return nil, err
	}
	next := maps.Clone(old)
	next[host] = g
	t.groups.Store(&next)
	return g, nil
}

// RoundTrip runs req as a command in the group of req.URL.Host.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	call := &httpCall{base: t.base, req: req}
	defer call.closeUnsent()
	g, err := t.Group(req.URL.Host)
	if err != nil {
		return nil, err
	}
	name := req.Method
	if t.cfg.CommandName != nil {
		name = t.cfg.CommandName(req)
	}
	var resp *http.Response
	if t.cfg.Degrade {
		resp, err = Execute(req.Context(), g, degradingCall{call}, WithName(name))
	} else {
		resp, err = Execute(req.Context(), g, call, WithName(name))
	}
	if err != nil && resp != nil && IsBadRequest(err) {
		return resp, nil // a 4xx: the caller reads it like any response
	}
	return resp, err
}

// StatusError is the error of a response that the Transport turned into an
// error (5xx; its body was closed) or classified as a bad request (4xx).
type StatusError struct {
	StatusCode int
	Status     string // as in http.Response, such as "503 Service Unavailable"
}

// Error returns "http status " and the status.
func (e *StatusError) Error() string { return "http status " + e.Status }

// httpCall is one request as a command.
type httpCall struct {
	base    http.RoundTripper
	req     *http.Request
	started atomic.Bool // Run began: the base transport owns the request body
}

func (c *httpCall) Run(ctx context.Context) (*http.Response, error) {
	c.started.Store(true)
	// ctx ends at our deadline or when the caller leaves; it must abort the
	// exchange but not the body the caller reads after Execute returns (and
	// cancels ctx). So the request gets its own context, cancelled by ctx
	// until the headers are in, then by closing the body.
	reqCtx, cancel := context.WithCancel(c.req.Context())
	stop := context.AfterFunc(ctx, cancel)
	resp, err := c.base.RoundTrip(c.req.WithContext(reqCtx))
	if !stop() { // ctx ended during the exchange: whatever came back is too late
		cancel()
		if resp != nil {
			resp.Body.Close()
		}
		return nil, context.Cause(ctx)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	switch {
	case resp.StatusCode >= 500:
		drain(resp.Body)
		return nil, &StatusError{StatusCode: resp.StatusCode, Status: resp.Status}
	case resp.StatusCode >= 400:
		return resp, BadRequest(&StatusError{StatusCode: resp.StatusCode, Status: resp.Status})
	}
	return resp, nil
}

// Discard closes the body of a response that arrived too late.
func (c *httpCall) Discard(resp *http.Response) { resp.Body.Close() }

// closeUnsent closes the request body if Run never started: a RoundTripper
// must close it even when it sends nothing. Once Execute has returned, a
// Run that has not started never will.
func (c *httpCall) closeUnsent() {
	if !c.started.Load() && c.req.Body != nil {
		c.req.Body.Close()
	}
}

// degradingCall is an httpCall whose fallback answers a short-circuit or a
// rejection with a degraded 503 response and declines otherwise.
type degradingCall struct{ *httpCall }

func (d degradingCall) Fallback(_ context.Context, err error) (*http.Response, error) {
	var e *Error
	if !errors.As(err, &e) {
		return nil, ErrFallbackMissing
	}
	switch e.Event {
	case metrics.ShortCircuited, metrics.ThreadPoolRejected, metrics.SemaphoreRejected:
		return degradedResponse(d.req, e), nil
	}
	return nil, ErrFallbackMissing // failures and timeouts reach the caller as errors
}

// degradedResponse is the 503 served instead of a request that never left.
func degradedResponse(req *http.Request, e *Error) *http.Response {
	retry := int64(1)
	if d := e.RetryAfter(); d > time.Second {
		retry = int64((d + time.Second - 1) / time.Second)
	}
	reason := reasons[e.Event]
	body := "bulwark: " + e.Group + ": " + reason + "\n"
	h := http.Header{}
	h.Set("Retry-After", strconv.FormatInt(retry, 10))
	h.Set("X-Degraded", reason)
	h.Set("Content-Type", "text/plain; charset=utf-8")
	return &http.Response{
		Status:        "503 Service Unavailable",
		StatusCode:    http.StatusServiceUnavailable,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// cancelOnClose releases the request's context when the body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// drain reads a little of a body we drop, so the connection can be reused,
// and closes it.
func drain(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, 4<<10)
	body.Close()
}
