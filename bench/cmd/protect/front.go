package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// Reasons a call did not get a good answer from the backend.
const (
	reasonShortCircuit = "short-circuit"
	reasonRejected     = "rejected"
	reasonTimeout      = "timeout"
	reasonError        = "error"
)

// answer is what a protected call produced.
type answer struct {
	fallback bool   // the answer came from the fallback
	reason   string // why the backend's answer was not used ("" when it was)
	err      error  // the caller got an error (no fallback, or the fallback failed)
}

// call is one protected call to a backend route; do performs the HTTP request.
type call func(ctx context.Context) answer

// protection is a library under test: it wraps each endpoint's backend call.
type protection struct {
	name string
	// wrap returns the protected call for an endpoint. It may keep state (breakers, pools) per
	// endpoint; closeAll releases it at the end of the run.
	wrap func(endpoint string, do func(ctx context.Context) error) (call, error)
	// closeAll releases everything wrap created (nil if nothing to release).
	closeAll func()
}

// front is the service under protection: /healthy and /faulty each call the backend route of the
// same name through the library, sharing one HTTP client (one connection pool) so a sick route can
// starve the healthy one of connections unless the library isolates them.
type front struct {
	client     *http.Client
	backendURL string
	firstOpen  [numEndpoints]atomic.Int64 // unix nanos of the first short-circuit per endpoint
}

// do returns the backend request for a route.
func (f *front) do(route string) func(ctx context.Context) error {
	url := f.backendURL + "/" + route
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := f.client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("backend %s: status %d", route, resp.StatusCode)
		}
		return nil
	}
}

// Headers by which the front tells the load generator what happened.
const (
	hdrOutcome   = "X-Bench-Outcome" // ok | fallback | error
	hdrReason    = "X-Bench-Reason"
	hdrTook      = "X-Bench-Took-Ns"    // time spent in the protected call
	hdrAfterOpen = "X-Bench-After-Open" // "1" if the endpoint had short-circuited before this call began
)

func (f *front) handler(calls [numEndpoints]call) http.Handler {
	mux := http.NewServeMux()
	for i, name := range endpointNames {
		c := calls[i]
		mux.HandleFunc("/"+name, func(w http.ResponseWriter, r *http.Request) {
			afterOpen := f.firstOpen[i].Load() != 0
			start := time.Now()
			a := c(r.Context())
			took := time.Since(start)
			if a.reason == reasonShortCircuit {
				f.firstOpen[i].CompareAndSwap(0, start.UnixNano())
			}
			h := w.Header()
			h.Set(hdrReason, a.reason)
			h.Set(hdrTook, strconv.FormatInt(int64(took), 10))
			if afterOpen {
				h.Set(hdrAfterOpen, "1")
			}
			switch {
			case a.err != nil:
				h.Set(hdrOutcome, "error")
				w.WriteHeader(http.StatusBadGateway)
			case a.fallback:
				h.Set(hdrOutcome, "fallback")
				_, _ = w.Write([]byte("fallback"))
			default:
				h.Set(hdrOutcome, "ok")
				_, _ = w.Write([]byte("ok"))
			}
		})
	}
	return mux
}

// classify maps a context error to a reason; everything else is reasonError.
func classifyCtx(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return reasonTimeout
	}
	return reasonError
}
