package grpcguard

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/priority"
)

// ServerConfig configures a Server. Every field is optional.
type ServerConfig struct {
	// Group is the configuration of the group each method gets on its first
	// call, named by the method's full name ("/orders.v1.Orders/Get"). A
	// group that already exists in the registry under that name is used as
	// is (it must be a Semaphore group), so one method can get its own
	// settings by creating its group first. Limiters in Group.RateLimit
	// and Group.KeyedRateLimit are shared by every method created with
	// this configuration: one quota per caller across them.
	//
	// Server groups are always Semaphore groups: the handler runs on the
	// RPC's own goroutine, which grpc has already made, so Group.Strategy
	// is ignored and Group.QueueSize must be 0. Group.MaxConcurrent bounds
	// the method's handlers running at once (streams for a streaming
	// method). Group.Timeout 0 means no timeout here, not command's 1 s: the
	// client's deadline bounds the handler's ctx anyway; a Timeout set
	// bounds each handler (a whole stream, for a streaming method), and a
	// handler that returns after it is a TIMEOUT answered DeadlineExceeded.
	Group command.GroupConfig
	// Key returns the caller's key for Group.KeyedRateLimit from the RPC's
	// ctx (its metadata, its peer) and method: KeyByPeer, KeyByMetadata or
	// your own. Required when Group.KeyedRateLimit is set. The keys should
	// be bounded (ratelimit.PerKeyConfig.MaxKeys bounds them anyway).
	Key func(ctx context.Context, method string) string
	// Priority returns the RPC's priority for Group.Priority (priority
	// shedding: when the method's bulkhead fills up, the less important
	// calls are refused first, answered Unavailable) from its ctx and
	// method: PriorityByMetadata or your own. Default: none, every call has
	// Group.Priority.Default.
	Priority func(ctx context.Context, method string) priority.Level
	// Pushback, when positive, is the pushback (PushbackMetadata) of the
	// refusals whose delay bulwark does not know: a full bulkhead, a call
	// shed by priority, a breaker half-open. Default 0: those refusals
	// carry none (a rate limit's and an open breaker's own delays are sent
	// whatever it says).
	Pushback time.Duration
	// Classes overrides DefaultClass for the status codes the handlers
	// return: how the method's breakers count them.
	Classes map[codes.Code]Class
	// MaxGroups bounds the groups the Server has created that are open at
	// once. A grpc.UnknownServiceHandler passes method names from the
	// request to the stream interceptor; past the bound a call that needs
	// a new group fails with ResourceExhausted (ErrTooManyGroups), logged
	// once. Default DefaultMaxGroups (1,000).
	MaxGroups int
	// Logger receives the Server's log record. Default: the registry's.
	Logger *slog.Logger
}

// Server holds the server interceptors: Unary and Stream run each handler
// as a bulwark command in its method's group, behind its rate limits, its
// breakers and its bulkhead. Create it with NewServer and install it on a
// grpc.Server:
//
//	srv := grpc.NewServer(grpc.UnaryInterceptor(s.Unary), grpc.StreamInterceptor(s.Stream))
//
// A call the Server refuses never reaches its handler: it is answered
// ResourceExhausted (a rate limit) or Unavailable (an open breaker, a full
// bulkhead), with the trailer grpc-retry-pushback-ms (PushbackMetadata)
// when bulwark knows when to come back. A Server is safe for concurrent
// use.
type Server struct {
	groups   *groups
	key      func(ctx context.Context, method string) string
	priority func(ctx context.Context, method string) priority.Level
	pushback time.Duration
	classes  classes
}

// NewServer returns a Server that keeps its groups in reg. The error wraps
// command.ErrInvalidConfig and names the field and its value when cfg is
// invalid.
func NewServer(reg *command.Registry, cfg ServerConfig) (*Server, error) {
	if reg == nil {
		return nil, fmt.Errorf("%w: grpcguard: NewServer needs a registry (command.NewRegistry)", command.ErrInvalidConfig)
	}
	if cfg.Group.QueueSize != 0 {
		return nil, fmt.Errorf("%w: grpcguard: ServerConfig.Group.QueueSize %d must be 0: server groups are Semaphore groups, which have no queue", command.ErrInvalidConfig, cfg.Group.QueueSize)
	}
	cfg.Group.Strategy = command.Semaphore
	if cfg.Group.Timeout == 0 {
		cfg.Group.Timeout = command.NoTimeout
	}
	if err := cfg.Group.Validate(); err != nil {
		return nil, fmt.Errorf("grpcguard: ServerConfig.Group: %w", err)
	}
	if cfg.Group.KeyedRateLimit != nil && cfg.Key == nil {
		return nil, fmt.Errorf("%w: grpcguard: ServerConfig.Group.KeyedRateLimit is set but ServerConfig.Key is nil: every caller would share one quota (use KeyByPeer, KeyByMetadata or a function of yours)", command.ErrInvalidConfig)
	}
	if cfg.Pushback < 0 {
		return nil, fmt.Errorf("%w: grpcguard: ServerConfig.Pushback %v must not be negative", command.ErrInvalidConfig, cfg.Pushback)
	}
	if cfg.MaxGroups < 0 {
		return nil, fmt.Errorf("%w: grpcguard: ServerConfig.MaxGroups %d must not be negative", command.ErrInvalidConfig, cfg.MaxGroups)
	}
	cls, err := newClasses("ServerConfig.Classes", cfg.Classes)
	if err != nil {
		return nil, err
	}
	return &Server{groups: newGroups(reg, cfg.Group, cfg.MaxGroups, cfg.Logger), key: cfg.Key, priority: cfg.Priority,
		pushback: cfg.Pushback, classes: cls}, nil
}

// Group returns the group of method's handlers, creating it if needed. Its
// error has a gRPC status: it matches ErrTooManyGroups when MaxGroups
// groups are open, command.ErrClosed once the registry is closed, and
// tells of a group of that name that is not a Semaphore group.
func (s *Server) Group(method string) (*command.Group, error) {
	g, err := s.groups.get(method)
	if err != nil {
		return nil, err
	}
	if g.Config().Strategy != command.Semaphore {
		err := fmt.Errorf("grpcguard: the group %s of a server method must be a Semaphore group, not %v: a handler must run on its RPC's goroutine", g.Name(), g.Config().Strategy)
		return nil, &statusError{st: status.New(codes.Internal, err.Error()), err: err}
	}
	return g, nil
}

// Unary is the unary server interceptor (a grpc.UnaryServerInterceptor):
// it runs the handler as a command named after the method, in the
// method's group, with the caller's key (ServerConfig.Key).
func (s *Server) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	g, err := s.Group(info.FullMethod)
	if err != nil {
		return nil, err
	}
	h := &unaryHandler{classes: s.classes, handler: handler, req: req}
	r, err := command.Execute(ctx, g, h, s.options(ctx, info.FullMethod)...)
	if err == nil {
		return r.resp, r.err
	}
	return nil, answer(ctx, err, s.pushback, func(md metadata.MD) error { return grpc.SetTrailer(ctx, md) })
}

// Stream is the stream server interceptor (a grpc.StreamServerInterceptor):
// it runs the handler, the whole stream, as a command named after the
// method, in the method's group; the handler's stream has Run's context.
func (s *Server) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	g, err := s.Group(info.FullMethod)
	if err != nil {
		return err
	}
	h := &streamHandler{classes: s.classes, handler: handler, srv: srv, ss: ss}
	r, err := command.Execute(ss.Context(), g, h, s.options(ss.Context(), info.FullMethod)...)
	if err == nil {
		return r.err
	}
	return answer(ss.Context(), err, s.pushback, func(md metadata.MD) error { ss.SetTrailer(md); return nil })
}

// options returns the command options of a call of method.
func (s *Server) options(ctx context.Context, method string) []command.Option {
	opts := make([]command.Option, 1, 3)
	opts[0] = command.WithName(method)
	if s.key != nil {
		opts = append(opts, command.WithKey(s.key(ctx, method)))
	}
	if s.priority != nil {
		opts = append(opts, command.WithPriority(s.priority(ctx, method)))
	}
	return opts
}

// answer returns the error a handler's caller gets for Execute's error err
// (ctx is the RPC's; see answerOf), and sets the pushback trailer through
// setTrailer when bulwark refused the call and knows when to come back,
// or else, for a refusal of an Unavailable or ResourceExhausted kind, the
// pushback dflt (0: none).
func answer(ctx context.Context, err error, dflt time.Duration, setTrailer func(metadata.MD) error) error {
	_, refused, out := answerOf(ctx, err)
	if refused != nil {
		d := refused.RetryAfter()
		if c := status.Code(out); d <= 0 && (c == codes.Unavailable || c == codes.ResourceExhausted) {
			d = dflt
		}
		if d > 0 {
			// A failure to set it (the stream is done) leaves the answer
			// without pushback, nothing worse.
			_ = setTrailer(metadata.Pairs(PushbackMetadata, formatPushback(d)))
		}
	}
	return out
}

// handled is the result of a handler: its response (unary), or its error
// when the error's class is Success.
type handled struct {
	resp any
	err  error
}

// unaryHandler is one unary handler call as a command.
type unaryHandler struct {
	classes classes
	handler grpc.UnaryHandler
	req     any
}

func (h *unaryHandler) Run(ctx context.Context) (handled, error) {
	resp, err := h.handler(ctx, h.req)
	if err == nil {
		return handled{resp: resp}, nil
	}
	settle(ctx, err)
	ok, fail := h.classes.judge(err, &rpcError{})
	return handled{err: ok}, fail
}

// streamHandler is one stream handler call as a command.
type streamHandler struct {
	classes classes
	handler grpc.StreamHandler
	srv     any
	ss      grpc.ServerStream
}

func (h *streamHandler) Run(ctx context.Context) (handled, error) {
	err := h.handler(h.srv, &serverStream{ServerStream: h.ss, ctx: ctx})
	if err == nil {
		return handled{}, nil
	}
	settle(ctx, err)
	ok, fail := h.classes.judge(err, &rpcError{})
	return handled{err: ok}, fail
}

// serverStream is a handler's stream, with Run's context.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *serverStream) Context() context.Context { return s.ctx }

// KeyByPeer is a ServerConfig.Key: the caller's network address without
// its port (an IP address), or "" when the RPC has no peer.
func KeyByPeer(ctx context.Context, _ string) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	addr := p.Addr.String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// KeyByMetadata returns a ServerConfig.Key that reads the first value of
// the incoming metadata key name (such as "x-tenant"), or "" when the call
// has none: callers without it share one quota, so leaving it out escapes
// nothing. A key taken from metadata is the caller's word: authenticate it
// (or key by peer) where a quota must hold against a hostile caller.
func KeyByMetadata(name string) func(ctx context.Context, method string) string {
	return func(ctx context.Context, _ string) string {
		if v := metadata.ValueFromIncomingContext(ctx, name); len(v) > 0 {
			return v[0]
		}
		return ""
	}
}

// PriorityByMetadata returns a ServerConfig.Priority that reads the first
// value of the incoming metadata key name (such as "x-priority"): "0" to
// "3" or "P0" to "P3"; a call without it, or with another value, has the
// priority missing. Metadata is the caller's word: set it at a gateway you
// trust, or derive the priority from the method.
func PriorityByMetadata(name string, missing priority.Level) func(ctx context.Context, method string) priority.Level {
	return func(ctx context.Context, _ string) priority.Level {
		v := metadata.ValueFromIncomingContext(ctx, name)
		if len(v) == 0 {
			return missing
		}
		s := strings.TrimPrefix(strings.TrimPrefix(v[0], "P"), "p")
		if p, err := strconv.ParseUint(s, 10, 8); err == nil && p <= uint64(priority.P3) {
			return priority.Level(p)
		}
		return missing
	}
}
