package grpcguard

import (
	"context"
	"fmt"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/bulwark-go/bulwark/command"
)

// ProbeMetadata is the metadata key the client interceptors set, to "1", on
// a call that is a half-open probe of its breakers (see command.IsProbe),
// so that the server's logs can count the breaker's test calls apart from
// user traffic, as httpguard's X-Breaker-Probe header does for HTTP.
const ProbeMetadata = "x-breaker-probe"

// GroupBy says how a Client puts calls into groups: a group is one
// bulkhead and one group breaker; each method has its own command breaker
// and metrics in its group.
type GroupBy uint8

const (
	// ByTarget makes one group per target, named by the ClientConn's
	// CanonicalTarget ("dns:///orders.internal:443"): the methods of one
	// server share a bulkhead and a group breaker. The default.
	ByTarget GroupBy = iota
	// ByMethod makes one group per target and method, named by the target
	// and the full method ("dns:///orders.internal:443/orders.v1.Orders/Get"):
	// each method has its own bulkhead, so a slow method cannot take the
	// workers of the fast ones.
	ByMethod
)

// String returns "by_target" or "by_method".
func (b GroupBy) String() string {
	switch b {
	case ByTarget:
		return "by_target"
	case ByMethod:
		return "by_method"
	}
	return fmt.Sprintf("GroupBy(%d)", uint8(b))
}

// ClientConfig configures a Client. Every field is optional.
type ClientConfig struct {
	// Group is the configuration of the groups the Client creates, each on
	// its first call (see GroupBy and Client.GroupName for the names). A
	// group that already exists in the registry under that name is used as
	// is, so one target or method can get its own settings by creating its
	// group first. A limiter in Group.RateLimit is shared by every group
	// created with this configuration. Default: command's defaults (Thread,
	// 10 workers, 1 s timeout).
	Group command.GroupConfig
	// GroupBy chooses one group per target (the default) or per method.
	GroupBy GroupBy
	// Classes overrides DefaultClass for the status codes it names: what
	// a code counts as (Failure, BadRequest, Success). OK cannot be
	// overridden.
	Classes map[codes.Code]Class
	// Idempotent reports whether the calls of a method (its full name,
	// "/orders.v1.Orders/Get") may be made again after a failure: in a group
	// with retries (Group.Retry), only they are retried, waiting for the
	// server's pushback when it sends one. Default: none is.
	Idempotent func(method string) bool
	// MaxGroups bounds the groups the Client has created that are open at
	// once: a call that needs another one fails with ResourceExhausted and
	// an error matching ErrTooManyGroups (logged once), so that targets
	// taken from request data cannot make groups without end. Default
	// DefaultMaxGroups (1,000).
	MaxGroups int
	// Logger receives the Client's log record. Default: the registry's.
	Logger *slog.Logger
}

// Client holds the client interceptors: Unary and Stream run each call as
// a bulwark command in its group. Create it with NewClient and install it
// on a ClientConn:
//
//	conn, err := grpc.NewClient(target, grpc.WithUnaryInterceptor(c.Unary), grpc.WithStreamInterceptor(c.Stream), ...)
//
// A Client is safe for concurrent use, and one Client can serve several
// ClientConns: their targets get groups of their own.
type Client struct {
	groups     *groups
	by         GroupBy
	classes    classes
	idempotent func(method string) bool
}

// NewClient returns a Client that keeps its groups in reg. The error
// wraps command.ErrInvalidConfig and names the field and its value when
// cfg is invalid.
func NewClient(reg *command.Registry, cfg ClientConfig) (*Client, error) {
	if reg == nil {
		return nil, fmt.Errorf("%w: grpcguard: NewClient needs a registry (command.NewRegistry)", command.ErrInvalidConfig)
	}
	if err := cfg.Group.Validate(); err != nil {
		return nil, fmt.Errorf("grpcguard: ClientConfig.Group: %w", err)
	}
	if cfg.GroupBy > ByMethod {
		return nil, fmt.Errorf("%w: grpcguard: ClientConfig.GroupBy %v is not a known GroupBy (ByTarget, ByMethod)", command.ErrInvalidConfig, cfg.GroupBy)
	}
	if cfg.MaxGroups < 0 {
		return nil, fmt.Errorf("%w: grpcguard: ClientConfig.MaxGroups %d must not be negative", command.ErrInvalidConfig, cfg.MaxGroups)
	}
	cls, err := newClasses("ClientConfig.Classes", cfg.Classes)
	if err != nil {
		return nil, err
	}
	return &Client{
		groups:     newGroups(reg, cfg.Group, cfg.MaxGroups, cfg.Logger),
		by:         cfg.GroupBy,
		classes:    cls,
		idempotent: cfg.Idempotent,
	}, nil
}

// GroupName returns the name of the group of the calls of method (its
// full name, "/orders.v1.Orders/Get") to target (a ClientConn's
// CanonicalTarget): target itself (ByTarget) or target followed by method
// (ByMethod). Create a group of that name before the first call to give it
// its own settings.
func (c *Client) GroupName(target, method string) string {
	if c.by == ByMethod {
		return target + method
	}
	return target
}

// Group returns the group of the calls of method on cc, creating it if
// needed. Its error has a gRPC status and matches ErrTooManyGroups when
// MaxGroups groups are open, or command.ErrClosed once the registry is
// closed.
func (c *Client) Group(cc *grpc.ClientConn, method string) (*command.Group, error) {
	target := ""
	if cc != nil {
		target = cc.CanonicalTarget()
	}
	return c.groups.get(c.GroupName(target, method))
}

// Unary is the unary client interceptor (a grpc.UnaryClientInterceptor):
// it runs the call as a command named method in its group. See the package
// documentation for what the caller gets back.
func (c *Client) Unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	g, err := c.Group(cc, method)
	if err != nil {
		return err
	}
	u := &unaryCall{client: c, method: method, req: req, reply: reply, cc: cc, invoker: invoker}
	u.opts, u.sinks = splitOptions(opts)
	thread := g.Config().Strategy == command.Thread
	if thread {
		// Run may outlive this call: it gets copies, never the caller's
		// messages (see message.go).
		if u.req, err = cloneMessage("request", req); err != nil {
			return err
		}
		pm, ok := reply.(proto.Message)
		if !ok {
			return notProto("reply", reply)
		}
		u.reply, u.emptyReply = nil, pm
	}
	r, err := command.Execute(ctx, g, u, command.WithName(method))
	if err == nil {
		if thread && r.err == nil {
			copyMessage(reply.(proto.Message), r.reply.(proto.Message))
		}
		u.sinks.deliver(&r.recv)
		return r.err
	}
	got, _, out := answerOf(ctx, err)
	if got != nil {
		u.sinks.deliver(got.recv) // the attempt answered before Execute returned
	}
	return out
}

// unaryCall is one unary call as a command.
type unaryCall struct {
	client     *Client
	method     string
	req        any           // the caller's, or a clone (Thread)
	reply      any           // the caller's (Semaphore), or nil (Thread)
	emptyReply proto.Message // Thread: the caller's reply, whose type each attempt's own reply has
	cc         *grpc.ClientConn
	invoker    grpc.UnaryInvoker
	opts       []grpc.CallOption // the caller's, less Header, Trailer and Peer
	sinks      sinks
}

// unaryResult is what one attempt of a unary call received.
type unaryResult struct {
	reply any      // the reply grpc unmarshalled into
	recv  received // header, trailer, peer
	err   error    // a status error whose class is Success
}

// Run makes one attempt: it invokes the call with the attempt's own call
// options (and, in a Thread group, its own reply), a probe's tagged with
// ProbeMetadata.
func (u *unaryCall) Run(ctx context.Context) (*unaryResult, error) {
	r := &unaryResult{reply: u.reply}
	if u.emptyReply != nil {
		r.reply = emptyLike(u.emptyReply)
	}
	err := u.invoker(outgoing(ctx, ctx), u.method, u.req, r.reply, u.cc, u.sinks.options(u.opts, &r.recv)...)
	if err == nil {
		return r, nil
	}
	settle(ctx, err)
	ok, fail := u.client.classes.judge(err, &rpcError{recv: &r.recv})
	if fail != nil {
		return nil, fail
	}
	r.err = ok
	return r, nil
}

// Idempotent makes the call retryable when ClientConfig.Idempotent says so
// of its method.
func (u *unaryCall) Idempotent() bool {
	return u.client.idempotent != nil && u.client.idempotent(u.method)
}

// outgoing returns ctx with ProbeMetadata added to its outgoing metadata
// when run, Run's context, is a probe's (see command.IsProbe).
func outgoing(run, ctx context.Context) context.Context {
	if !command.IsProbe(run) {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, ProbeMetadata, "1")
}
