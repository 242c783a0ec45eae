package dashboard

import (
	"context"
	"net/http"
	"strings"
)

// StreamPath is where the handler of New serves the stream.
const StreamPath = "/hystrix.stream"

// ControlPath is where the handler of New serves Config.Control, the
// control endpoint, when there is one.
const ControlPath = "/control"

// Handler serves the dashboard page and its stream together: the stream at
// any path ending in StreamPath, the control endpoint (when there is one) at
// any path ending in ControlPath, the page everywhere else. It is what New
// returns, and an Aggregate routes its requests through one too; mount it
// at a path ending in "/" (with http.StripPrefix or not).
type Handler struct {
	page    http.Handler
	stream  *Stream
	control http.Handler // nil: no control endpoint
}

// New returns a handler that serves the dashboard page at "/" and the
// hystrix.stream of src at "/hystrix.stream". With cfg.Control set (see
// package dashboard/control) it also serves that control endpoint at
// "/control", and the page offers controls to whoever enters its token. It
// fails, wrapping ErrInvalidConfig, if cfg is invalid. To mount the page
// and the stream apart, use NewPage and NewStream.
func New(src Source, cfg Config) (*Handler, error) {
	control := cfg.Control
	cfg.Control = nil // the stream serves none
	stream, err := NewStream(src, cfg)
	if err != nil {
		return nil, err
	}
	return newHandler(stream, control)
}

// newHandler returns the handler serving stream, the page that reads it
// and, if control is not nil, the control endpoint the page then offers:
// the routing New and Aggregate share.
func newHandler(stream *Stream, control http.Handler) (*Handler, error) {
	pc := PageConfig{StreamURL: DefaultStreamURL}
	if control != nil {
		pc.ControlURL = strings.TrimPrefix(ControlPath, "/")
	}
	page, err := NewPage(pc)
	if err != nil {
		return nil, err
	}
	return &Handler{page: page, stream: stream, control: control}, nil
}

// Stream returns the stream handler New built, for its Clients count.
func (h *Handler) Stream() *Stream { return h.stream }

// Close closes the stream: see Stream.Close. The page keeps being served.
func (h *Handler) Close(ctx context.Context) error { return h.stream.Close(ctx) }

// ServeHTTP routes a request to the stream, the control endpoint or the page.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, StreamPath) {
		h.stream.ServeHTTP(w, r)
		return
	}
	if h.control != nil && strings.HasSuffix(r.URL.Path, ControlPath) {
		h.control.ServeHTTP(w, r)
		return
	}
	h.page.ServeHTTP(w, r)
}
