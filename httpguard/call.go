package httpguard

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// call is one request as a command.
type call struct {
	base    http.RoundTripper
	req     *http.Request
	started atomic.Bool // Run began: the base transport owns the request body

	mu       sync.Mutex
	upstream *http.Response // a 5xx response, kept for RoundTrip
	left     bool           // RoundTrip has taken upstream: a later one is Run's to close
}

// Write reports whether the request is a write: any method but GET, HEAD,
// OPTIONS and TRACE (the safe methods of RFC 9110). A read-only group (see
// command.GroupConfig.ReadOnly) refuses writes as READ_ONLY and serves
// reads.
func (c *call) Write() bool {
	switch c.req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	return true
}

func (c *call) Run(ctx context.Context) (*http.Response, error) {
	c.started.Store(true)
	c.dropKept()
	// ctx ends at our deadline or when the caller leaves; it must abort the
	// exchange but not the body the caller reads after Execute returns (and
	// cancels ctx). So the request gets its own context, cancelled by ctx
	// until the headers are in, then by closing the body.
	reqCtx, cancel := context.WithCancel(c.req.Context())
	stop := context.AfterFunc(ctx, cancel)
	resp, err := c.base.RoundTrip(outgoing(ctx, c.req.WithContext(reqCtx)))
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
		// A failure, whose response RoundTrip may still pass through:
		// Execute returns no value with a FAILURE, so it goes aside.
		c.keep(resp)
		return nil, &statusError{status: resp.Status, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
	case resp.StatusCode >= 400:
		return resp, command.BadRequest(&statusError{status: resp.Status})
	}
	return resp, nil
}

// Discard closes the body of a response the caller will not get (it came
// after the deadline, or the caller left).
func (c *call) Discard(resp *http.Response) {
	if resp != nil {
		resp.Body.Close()
	}
}

// Idempotent makes the request retryable in a group with retries
// (retry.Config) when its method is safe (GET, HEAD, OPTIONS, TRACE)
// and it has no body to send again.
func (c *call) Idempotent() bool {
	switch c.req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, "":
		return c.req.Body == nil || c.req.Body == http.NoBody
	}
	return false
}

// keep sets resp aside for RoundTrip, or closes it if RoundTrip has already
// returned (the caller left at the deadline while Run went on). A response
// still set aside by an earlier attempt (one detached at its deadline in a
// Thread group that answered while the next attempt ran) is closed.
func (c *call) keep(resp *http.Response) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left {
		resp.Body.Close()
		return
	}
	if c.upstream != nil {
		c.upstream.Body.Close()
	}
	c.upstream = resp
}

// dropKept closes the 5xx response an earlier attempt of a retried
// request set aside: only the last attempt's can reach the caller, and an
// open body would hold its connection while the next attempt waits for
// one.
func (c *call) dropKept() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.upstream != nil {
		c.upstream.Body.Close()
		c.upstream = nil
	}
}

// take returns the response Run set aside, if any; from then on Run closes
// what it would have set aside.
func (c *call) take() *http.Response {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.left = true
	resp := c.upstream
	c.upstream = nil
	return resp
}

// closeUnsent closes the request body if Run never started: a RoundTripper
// must close it even when it sends nothing. Once Execute has returned, a
// Run that has not started never will.
func (c *call) closeUnsent() {
	if !c.started.Load() && c.req.Body != nil {
		c.req.Body.Close()
	}
}

// degradingCall is a call whose fallback answers with a degraded 503: a
// short-circuit, a rejection or a queue timeout when refusals is set (a
// rate-limit refusal: 429), a 5xx when serverErrors is set. It declines
// otherwise.
type degradingCall struct {
	*call
	refusals, serverErrors bool
}

func (d degradingCall) Fallback(_ context.Context, err error) (*http.Response, error) {
	var e *command.Error
	if !errors.As(err, &e) {
		return nil, command.ErrFallbackMissing
	}
	var se *statusError
	switch e.Event {
	case metrics.ShortCircuited, metrics.ThreadPoolRejected, metrics.SemaphoreRejected, metrics.QueueTimeout,
		metrics.ReadOnly, metrics.Throttled:
		if d.refusals {
			return degradedResponse(d.req, e, http.StatusServiceUnavailable), nil
		}
	case metrics.RateLimited:
		if d.refusals {
			return degradedResponse(d.req, e, http.StatusTooManyRequests), nil
		}
	case metrics.Failure:
		if d.serverErrors && errors.As(e.Err, &se) {
			return degradedResponse(d.req, e, http.StatusServiceUnavailable), nil
		}
	}
	return nil, command.ErrFallbackMissing // the caller gets the error
}

// degradedResponse is the response of status code (503, or 429 for a rate
// limit) served instead of a request that never left, or of a 5xx.
func degradedResponse(req *http.Request, e *command.Error, code int) *http.Response {
	reason := e.Event.Label()
	body := "bulwark: " + e.Group + ": " + reason + "\n"
	h := http.Header{}
	h.Set("Retry-After", strconv.FormatInt(retryAfterSeconds(e.RetryAfter()), 10))
	h.Set("X-Degraded", reason)
	h.Set("Content-Type", "text/plain; charset=utf-8")
	return &http.Response{
		Status:        strconv.Itoa(code) + " " + http.StatusText(code),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// retryAfterSeconds returns d in whole seconds, rounded up, at least 1. It
// cannot overflow: the largest duration gives 9223372037.
func retryAfterSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return max(s, 1)
}

// parseRetryAfter returns the delay a Retry-After header value asks for,
// in seconds or as an HTTP date (read against now), or 0 when v is empty,
// malformed or in the past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 || s > int64(math.MaxInt64/time.Second) {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
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
