package httpguard

import (
	"context"
	"errors"
	"net/http"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// ProbeHeader is the header the Transport sets, to "1", on a request that is
// a half-open probe of its host's breakers (see command.IsProbe), so that
// the host's access logs can count the breaker's test calls apart from user
// traffic.
const ProbeHeader = "X-Breaker-Probe"

// outgoing returns req as it is sent: for a probe (ctx is Run's), a copy
// with ProbeHeader set. The caller's request, its Header map included, is
// never modified; req is already the Transport's own shallow copy.
func outgoing(ctx context.Context, req *http.Request) *http.Request {
	if !command.IsProbe(ctx) {
		return req
	}
	req.Header = req.Header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set(ProbeHeader, "1")
	return req
}

// ProbeReachable is a command.GroupConfig.ProbeClassifier for a Transport's
// groups that applies the rule "any answer proves the host reachable": a
// probe that got a response, even a 5xx, is a success for the breaker that
// probed, and only a failure with no response (connection refused, reset,
// TLS or DNS error) fails it. A timed-out probe always fails (the executor
// never asks the classifier about a timeout). Set it in Config.Group:
//
//	httpguard.Config{Group: command.GroupConfig{ProbeClassifier: httpguard.ProbeReachable}}
//
// The 5xx is still a FAILURE in the metrics and is returned to the caller
// as it came.
func ProbeReachable(err error) metrics.Event {
	var se *statusError
	if errors.As(err, &se) {
		return metrics.Success
	}
	return metrics.Failure
}
