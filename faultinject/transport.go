package faultinject

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// HeaderInjected is set, to the fault's name, on the responses a Transport
// makes up (injected server errors), so that they can be told from the
// server's own.
const HeaderInjected = "X-Fault-Injected"

// Transport is an http.RoundTripper that injects faults into the requests
// it passes to Next; build it with NewTransport. It is safe for concurrent
// use.
//
// For each request it draws the faults of f. Under PoolHeld it first
// waits for a connection of the request's host (scheme and host:port) in
// its imitated pool, and ends with context.Cause of the request's context
// if that ends first, as net/http's Transport does when all of a host's
// connections are in use; the connection stays held until the response
// body is closed or read to its end, or at once when the request fails.
// Then comes a delay (LatencyShare), then at most one of a hang until the
// request's context ends (HangShare), an *Error (ErrorShare; FaultReset
// matching syscall.ECONNRESET for ResetShare; FaultEOF matching
// io.ErrUnexpectedEOF for EOFShare), a failed lookup of the request's host
// (DNSShare: the *net.OpError a real one gives) or a synthetic server
// error response (ServerErrorShare, StatusCode, with HeaderInjected);
// these never reach the server, and the request's body is closed as the
// RoundTripper contract requires. Any other request goes to Next, and its
// response body trickles if SlowBodyShare drew it. An http.Client wraps
// the errors in a *url.Error; errors.Is still finds ErrInjected and the
// imitated cause through it (a wait for a connection that outlived its
// context ends with the context's error alone, as a real one does).
//
// The imitated pool counts only the requests that went through it, while
// PoolHeld was set: requests already in flight when a drill starts hold
// no connection of it. Disable, or a Set with a lower PoolHeld, frees the
// held connections at once, and the waiting requests go on in order.
type Transport struct {
	next   http.RoundTripper
	faults *Faults
	pools  pools
}

// NewTransport returns a Transport that injects the faults of f (none when
// f is nil or disabled) into the requests it passes to next
// (http.DefaultTransport when nil).
func NewTransport(next http.RoundTripper, f *Faults) *Transport {
	if next == nil {
		next = http.DefaultTransport
	}
	return &Transport{next: next, faults: f}
}

// RoundTrip injects the faults drawn for req, then passes it to the next
// RoundTripper unless a fault answered it.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	d, ok := t.faults.decide()
	if !ok {
		return t.next.RoundTrip(req)
	}
	var c *conn
	if d.cfg.PoolHeld > 0 {
		var err error
		if c, err = t.pools.of(req).acquire(req.Context(), t.faults); err != nil {
			closeBody(req)
			return nil, err
		}
	}
	resp, err := t.inject(req, d)
	if err != nil || resp.Body == nil || resp.Body == http.NoBody {
		c.free()
		return resp, err
	}
	if c != nil {
		resp.Body = &heldBody{ReadCloser: resp.Body, conn: c}
	}
	return resp, nil
}

// inject injects the faults of d into req, then passes it to the next
// RoundTripper unless a fault answered it.
func (t *Transport) inject(req *http.Request, d decision) (*http.Response, error) {
	ctx := req.Context()
	if err := sleep(ctx, d.latency); err != nil {
		closeBody(req)
		return nil, err
	}
	switch d.outcome {
	case hang:
		closeBody(req)
		<-ctx.Done()
		return nil, ctx.Err()
	case fail:
		closeBody(req)
		return nil, d.injectedError()
	case reset:
		closeBody(req)
		return nil, &Error{Fault: FaultReset, Err: syscall.ECONNRESET}
	case eof:
		closeBody(req)
		return nil, &Error{Fault: FaultEOF, Err: io.ErrUnexpectedEOF}
	case dnsFailure:
		closeBody(req)
		return nil, dnsError(req.URL.Hostname(), d.cfg.DNS)
	case serverError:
		closeBody(req)
		return serverErrorResponse(req, d.cfg.StatusCode), nil
	}
	resp, err := t.next.RoundTrip(req)
	if err == nil && d.slowBody {
		chunk := d.cfg.SlowBodyChunk
		if chunk == 0 {
			chunk = 1
		}
		resp.Body = &slowBody{ctx: ctx, body: resp.Body, chunk: chunk, delay: d.cfg.SlowBodyDelay}
	}
	return resp, err
}

// closeBody closes the body of a request that will not be sent.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// serverErrorResponse is an injected server error answering req.
func serverErrorResponse(req *http.Request, code int) *http.Response {
	if code == 0 {
		code = DefaultStatusCode
	}
	body := fmt.Sprintf("faultinject: injected %d\n", code)
	return &http.Response{
		Status:     fmt.Sprintf("%d %s", code, http.StatusText(code)),
		StatusCode: code,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header: http.Header{
			"Content-Type": {"text/plain; charset=utf-8"},
			HeaderInjected: {"server_error"},
		},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// slowBody trickles a response body: at most chunk bytes per Read, each
// after a pause of delay, which ends early with ctx.Err() when the
// request's context ends.
type slowBody struct {
	ctx   context.Context
	body  io.ReadCloser
	chunk int
	delay time.Duration
}

func (b *slowBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return b.body.Read(p)
	}
	if err := sleep(b.ctx, b.delay); err != nil {
		return 0, err
	}
	return b.body.Read(p[:min(len(p), b.chunk)])
}

// Close closes the server's body.
func (b *slowBody) Close() error { return b.body.Close() }
