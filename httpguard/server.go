package httpguard

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/priority"
	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
)

// DefaultMaxRoutes is the default of ServerConfig.MaxRoutes.
const DefaultMaxRoutes = 1000

// OtherRoute is the route of the requests whose route would be new once
// ServerConfig.MaxRoutes routes have groups.
const OtherRoute = "(other)"

// ServerConfig configures a Server, the protection of a service's own
// handlers. Every field is optional.
type ServerConfig struct {
	// Group is the configuration of the group each route gets on its first
	// request, named "http " followed by the route ("http GET
	// /users/{id}"). A group that already exists under that name is used
	// as is (it must be a Semaphore group), so a route can get its own
	// settings by creating its group first. Limiters in Group.RateLimit and
	// Group.KeyedRateLimit are shared by every route created with this
	// configuration.
	//
	// Server groups are Semaphore groups: the handler runs on the request's
	// own goroutine, so Group.Strategy is ignored and Group.QueueSize must
	// be 0. Group.MaxConcurrent bounds the route's handlers running at
	// once; Group.Priority sheds the less important requests first when
	// they fill up (see Priority). Group.Timeout 0 means no timeout here,
	// not command's 1 s: the request's ctx deadline bounds the handler
	// anyway; a Timeout set bounds each handler, which sees it in its
	// request's context.
	Group command.GroupConfig
	// Route names a request's route, which has its own group (bulkhead,
	// breakers, limits). Default RouteByPattern: the ServeMux pattern that
	// matched (wrap the handlers the mux calls, so that it has matched).
	// Routes must come from a small fixed set, never from request data:
	// MaxRoutes bounds them anyway.
	Route func(*http.Request) string
	// Key returns the caller's key for Group.KeyedRateLimit (a client
	// address, an authenticated tenant). Required when
	// Group.KeyedRateLimit is set.
	Key func(*http.Request) string
	// Priority returns a request's priority for Group.Priority, such as
	// PriorityHeader's. Default: none, every request has
	// Group.Priority.Default.
	Priority func(*http.Request) priority.Level
	// RetryAfter is the Retry-After of a refusal whose delay bulwark does
	// not know (a full bulkhead, a shed request, a breaker half-open).
	// Default 1 s; a rate limit's and an open breaker's own delays are
	// sent when known.
	RetryAfter time.Duration
	// Recover makes a handler's panic answer 500 (if the handler wrote
	// nothing yet) instead of panicking again. Default false: the panic is
	// counted (a FAILURE), logged at Error level with the handler's stack
	// by the registry's logger, and goes on up to net/http, which drops
	// the connection, as without the middleware; http.ErrAbortHandler is
	// re-panicked as is, unlogged, whatever Recover says.
	Recover bool
	// MaxRoutes bounds the routes that get a group of their own; the
	// requests of further routes share the group of OtherRoute. Default
	// DefaultMaxRoutes.
	MaxRoutes int
}

// Server protects a service's handlers: its Middleware runs each request
// as a bulwark command in its route's group, behind the group's rate
// limits, breakers and bulkhead, with priority shedding when the bulkhead
// fills up. A request the Server refuses never reaches the handler: it is
// answered 429 Too Many Requests (a rate limit) or 503 Service Unavailable
// (an open breaker, a full bulkhead, a shed request), with Retry-After. A
// Server is safe for concurrent use.
type Server struct {
	reg *command.Registry
	cfg ServerConfig

	mu     sync.Mutex
	routes map[string]*command.Group // the routes with a group of their own
}

// NewServer returns a Server that keeps its groups in reg. The error wraps
// command.ErrInvalidConfig and names the field and its value when cfg is
// invalid.
func NewServer(reg *command.Registry, cfg ServerConfig) (*Server, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: httpguard: "+format, append([]any{command.ErrInvalidConfig}, args...)...)
	}
	switch {
	case reg == nil:
		return nil, bad("NewServer needs a registry (command.NewRegistry)")
	case cfg.Group.QueueSize != 0:
		return nil, bad("ServerConfig.Group.QueueSize %d must be 0: server groups are Semaphore groups, which have no queue", cfg.Group.QueueSize)
	case cfg.Group.KeyedRateLimit != nil && cfg.Key == nil:
		return nil, bad("ServerConfig.Group.KeyedRateLimit is set but ServerConfig.Key is nil: every caller would share one quota")
	case cfg.RetryAfter < 0:
		return nil, bad("ServerConfig.RetryAfter %v must not be negative", cfg.RetryAfter)
	case cfg.MaxRoutes < 0:
		return nil, bad("ServerConfig.MaxRoutes %d must not be negative", cfg.MaxRoutes)
	}
	cfg.Group.Strategy = command.Semaphore
	if cfg.Group.Timeout == 0 {
		cfg.Group.Timeout = command.NoTimeout
	}
	if err := cfg.Group.Validate(); err != nil {
		return nil, fmt.Errorf("httpguard: ServerConfig.Group: %w", err)
	}
	if cfg.Route == nil {
		cfg.Route = RouteByPattern
	}
	if cfg.RetryAfter == 0 {
		cfg.RetryAfter = time.Second
	}
	if cfg.MaxRoutes == 0 {
		cfg.MaxRoutes = DefaultMaxRoutes
	}
	return &Server{reg: reg, cfg: cfg, routes: map[string]*command.Group{}}, nil
}

// RouteByPattern is the default ServerConfig.Route: the pattern of the
// ServeMux route that matched (Request.Pattern), or "" when none did (the
// middleware wraps the mux rather than its handlers).
func RouteByPattern(r *http.Request) string { return r.Pattern }

// PriorityHeader returns a ServerConfig.Priority that reads the header
// name: "0" to "3" or "P0" to "P3"; a request without it, or with another
// value, has the priority missing. A header is the caller's word: set it
// at a gateway you trust, or derive the priority from the route.
func PriorityHeader(name string, missing priority.Level) func(*http.Request) priority.Level {
	return func(r *http.Request) priority.Level {
		v := strings.TrimPrefix(strings.TrimPrefix(r.Header.Get(name), "P"), "p")
		if p, err := strconv.ParseUint(v, 10, 8); err == nil && p <= uint64(priority.P3) {
			return priority.Level(p)
		}
		return missing
	}
}

// Group returns the group of route, creating it if needed (OtherRoute's
// once MaxRoutes routes have one). The error is the registry's
// (command.ErrClosed once it is closed), or tells of a group of that name
// that is not a Semaphore group.
func (s *Server) Group(route string) (*command.Group, error) {
	s.mu.Lock()
	g, ok := s.routes[route]
	if !ok && len(s.routes) >= s.cfg.MaxRoutes {
		route = OtherRoute
		g, ok = s.routes[route]
	}
	s.mu.Unlock()
	if ok {
		if _, open := s.reg.Group(g.Name()); open {
			return g, nil
		}
	}
	g, err := s.reg.GroupOrNew(groupName(route), s.cfg.Group)
	if err != nil {
		return nil, err
	}
	if g.Config().Strategy != command.Semaphore {
		return nil, fmt.Errorf("httpguard: the group %s of a route must be a Semaphore group, not %v: a handler runs on its request's goroutine",
			g.Name(), g.Config().Strategy)
	}
	s.mu.Lock()
	s.routes[route] = g
	s.mu.Unlock()
	return g, nil
}

// groupName returns the name of route's group.
func groupName(route string) string {
	if route == "" {
		return "http"
	}
	return "http " + route
}

// Middleware returns next behind the Server: each request runs next as a
// command named after its route in the route's group, with the request's
// context (its deadline and cancellation hold; Group.Timeout, if set, cuts
// it shorter), the caller's key and the request's priority. The handler
// gets a ResponseWriter that passes http.Flusher, http.Hijacker and
// http.ResponseController's methods through to the server's (Unwrap), so
// streaming responses, server-sent events and hijacked connections work as
// without the middleware. A response with a 5xx status counts as a FAILURE
// in the route's breakers; anything else the handler answers is a SUCCESS.
// A handler that panics is a FAILURE and panics again (see
// ServerConfig.Recover). Each request ends in exactly one outcome in the
// route's group.
func (s *Server) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := s.cfg.Route(r)
		g, err := s.Group(route)
		if err != nil {
			http.Error(w, "bulwark: "+err.Error(), http.StatusInternalServerError)
			return
		}
		rw := &responseWriter{w: w}
		h := handler{next: next, w: rw, r: r}
		opts := make([]command.Option, 0, 3)
		opts = append(opts, command.WithName(groupName(route)))
		if s.cfg.Key != nil {
			opts = append(opts, command.WithKey(s.cfg.Key(r)))
		}
		if s.cfg.Priority != nil {
			opts = append(opts, command.WithPriority(s.cfg.Priority(r)))
		}
		_, err = command.Execute(r.Context(), g, h, opts...)
		s.answer(rw, err)
	})
}

// answer finishes the response of a request whose Execute returned err:
// nothing for a handler that answered, the panic again (or a 500 with
// Recover), or the refusal's 429 or 503 with Retry-After.
func (s *Server) answer(rw *responseWriter, err error) {
	var e *command.Error
	if err == nil || !errors.As(err, &e) {
		return
	}
	var pe *isolation.PanicError
	if e.Event == metrics.Failure && errors.As(e.Err, &pe) {
		if pe.Value == http.ErrAbortHandler {
			panic(pe.Value)
		}
		// Logged here with the handler's own stack: a panic again from here
		// would show net/http this function's.
		s.reg.Config().Logger.Error("bulwark: handler panicked", slog.String("group", e.Group),
			slog.Any("panic", pe.Value), slog.String("stack", string(pe.Stack)), slog.Bool("recovered", s.cfg.Recover))
		if !s.cfg.Recover {
			panic(pe.Value)
		}
		if !rw.wrote {
			http.Error(rw.w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
		}
		return
	}
	if rw.wrote || e.Event == metrics.Cancelled {
		return // the handler answered (a 5xx, or too late), or the client is gone
	}
	code := http.StatusServiceUnavailable
	if e.Event == metrics.RateLimited {
		code = http.StatusTooManyRequests
	}
	d := e.RetryAfter()
	if d <= 0 {
		d = s.cfg.RetryAfter
	}
	rw.w.Header().Set("Retry-After", strconv.FormatInt(retryAfterSeconds(d), 10))
	http.Error(rw.w, "bulwark: "+e.Event.Label(), code)
}

// handler is one request's handler call as a command.
type handler struct {
	next http.Handler
	w    *responseWriter
	r    *http.Request
}

func (h handler) Run(ctx context.Context) (struct{}, error) {
	r := h.r
	if ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	h.next.ServeHTTP(h.w, r)
	if h.w.status >= 500 {
		return struct{}{}, &serverStatus{code: h.w.status}
	}
	return struct{}{}, nil
}

// serverStatus is the Run error of a handler that answered a 5xx.
type serverStatus struct{ code int }

func (e *serverStatus) Error() string { return "handler answered " + strconv.Itoa(e.code) }

// responseWriter is the handler's http.ResponseWriter: it notes the status
// and whether anything was written, and passes the rest through.
type responseWriter struct {
	w      http.ResponseWriter
	status int  // the status written; 0: none yet
	wrote  bool // the header was written (explicitly or by a Write or Flush)
}

func (rw *responseWriter) Header() http.Header { return rw.w.Header() }

func (rw *responseWriter) WriteHeader(code int) {
	if !rw.wrote && code >= 200 {
		rw.status, rw.wrote = code, true
	}
	rw.w.WriteHeader(code)
}

func (rw *responseWriter) Write(b []byte) (int, error) {
	if !rw.wrote {
		rw.status, rw.wrote = http.StatusOK, true
	}
	return rw.w.Write(b)
}

// Flush is http.Flusher's: it flushes the server's writer, if it can.
func (rw *responseWriter) Flush() {
	if !rw.wrote {
		rw.status, rw.wrote = http.StatusOK, true
	}
	_ = http.NewResponseController(rw.w).Flush()
}

// Unwrap returns the server's writer, for http.ResponseController.
func (rw *responseWriter) Unwrap() http.ResponseWriter { return rw.w }

// Hijack is http.Hijacker's: it hijacks the server's connection, if it
// can. The middleware writes nothing on a hijacked connection.
func (rw *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, buf, err := http.NewResponseController(rw.w).Hijack()
	if err == nil {
		rw.wrote = true
	}
	return conn, buf, err
}
