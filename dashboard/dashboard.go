package dashboard

import (
	"context"
	"net/http"
	"strings"
)

// StreamPath is where the handler of New serves the stream.
const StreamPath = "/hystrix.stream"

// Handler serves the dashboard page and its stream together: the stream at
// any path ending in StreamPath, the page everywhere else. It is what New
// returns; mount it at a path ending in "/" (with http.StripPrefix or not).
type Handler struct {
	page   http.Handler
	stream *Stream
}

// New returns a handler that serves the dashboard page at "/" and the
// hystrix.stream of src at "/hystrix.stream". It fails, wrapping
// ErrInvalidConfig, if cfg is invalid. To mount the page and the stream
// apart, use NewPage and NewStream.
func New(src Source, cfg Config) (*Handler, error) {
	stream, err := NewStream(src, cfg)
	if err != nil {
		return nil, err
	}
	page, err := NewPage(PageConfig{StreamURL: DefaultStreamURL})
	if err != nil {
		return nil, err
	}
	return &Handler{page: page, stream: stream}, nil
}

// Stream returns the stream handler New built, for its Clients count.
func (h *Handler) Stream() *Stream { return h.stream }

// Close closes the stream: see Stream.Close. The page keeps being served.
func (h *Handler) Close(ctx context.Context) error { return h.stream.Close(ctx) }

// ServeHTTP routes a request to the stream or to the page.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, StreamPath) {
		h.stream.ServeHTTP(w, r)
		return
	}
	h.page.ServeHTTP(w, r)
}
