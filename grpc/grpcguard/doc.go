// Package grpcguard protects gRPC clients and servers with bulwark: its
// interceptors run each call as a command, behind circuit breakers, a
// bulkhead, a timeout and rate limits, counted in the registry's metrics
// like any other command.
//
//	reg := command.NewRegistry(command.RegistryConfig{})
//	defer reg.Close(ctx)
//	c, err := grpcguard.NewClient(reg, grpcguard.ClientConfig{Group: command.GroupConfig{Timeout: 200 * time.Millisecond}})
//	conn, err := grpc.NewClient(target, grpc.WithUnaryInterceptor(c.Unary), grpc.WithStreamInterceptor(c.Stream), creds)
//
//	s, err := grpcguard.NewServer(reg, grpcguard.ServerConfig{Group: command.GroupConfig{MaxConcurrent: 64}})
//	srv := grpc.NewServer(grpc.UnaryInterceptor(s.Unary), grpc.StreamInterceptor(s.Stream))
//
// # Client
//
// A Client puts calls into one group per target (ByTarget, the default) or
// per target and method (ByMethod); the command is the method, so each
// method has its own breaker in its group. The status code a call ends
// with is classified (DefaultClass, overridden per code by
// ClientConfig.Classes): Unavailable, DeadlineExceeded, ResourceExhausted,
// Internal, Unknown and DataLoss are failures; InvalidArgument, NotFound,
// AlreadyExists, PermissionDenied, Unauthenticated, FailedPrecondition,
// OutOfRange, Aborted, Unimplemented and a Canceled that the caller did not
// cause are bad requests, which the breakers do not count. A call the
// caller's context ends is CANCELLED, one the group's timeout ends is a
// TIMEOUT, whatever code grpc gave it; so is a DeadlineExceeded that comes
// at or after the call's deadline, which grpc sends along to the server,
// whose timer may end the call a moment before the caller's own fires (the
// interceptor then waits for the call's context to end). The same holds
// for a handler on the server.
//
// What the caller gets back: the server's answer as grpc gave it, the
// reply or a status error with the server's code, message and details
// (status.Code and status.FromError read them as without the
// interceptor). A call bulwark ended itself gets a status error
// of its own: Unavailable for a short-circuit or a full (or closed)
// bulkhead, ResourceExhausted for a rate limit, DeadlineExceeded for a
// timeout, Canceled or DeadlineExceeded for the caller's context, Internal
// for a panic in an inner interceptor. The error of a failure, or of a call
// bulwark ended, is one through which errors.As reaches the *command.Error
// behind it (its Event, its RetryAfter) and errors.Is matches command's
// sentinels (command.ErrRefused, command.ErrTimeout...); a bad request's error, or one
// whose class is Success, is the server's error itself.
//
// Pushback: the trailer grpc-retry-pushback-ms (PushbackMetadata) of a
// failed call is its Retry-After: Error.RetryAfter reports it, and in a
// group with retries (retry.Config, for the methods
// ClientConfig.Idempotent names) the retry waits exactly that long; a
// pushback of "do not retry" (negative, malformed) ends the retries. A
// half-open probe is sent with the metadata x-breaker-probe: 1
// (ProbeMetadata).
//
// # Detached calls never touch the caller's memory
//
// In a Thread group (command's default) the caller is answered at the
// deadline while the call goes on detached in its pool worker. grpc writes
// the reply, and the Header, Trailer and Peer call options, when the call
// ends, and reads the request when it sends it: a detached call doing
// that to the caller's own messages would race with the caller who has
// moved on (go test -race reports it). So in a Thread group the
// interceptor clones the request before the call, each attempt unmarshals
// into a reply of its own and fills call options of its own, and the
// reply and options are copied into the caller's only when the attempt's
// answer reaches the caller (proto.Merge into the reset reply). A detached
// attempt writes only its own copies, dropped when it ends. This needs
// messages that are proto.Message values: a call with other messages (a
// codec of your own) in a Thread group fails with Internal. A Semaphore
// group runs the call on the caller's goroutine, which it never leaves
// before the call ends, so there the caller's messages are used as they
// are: no copies, no detachment (a call that ignores its deadline keeps
// its caller). A grpc.OnFinish callback runs when grpc ends the call, in
// the worker for a detached one.
//
// # Streams
//
// A stream's call is establishing it: the streamer's NewStream runs as the
// command, through the rate limits, both breakers, the bulkhead (held
// while the stream is being established, not for its life) and the
// timeout (which bounds the establishment only), and its outcome is the
// one outcome of the stream. The established stream then lives under the
// caller's context. Its messages are not calls: an error from SendMsg or
// RecvMsg is returned as grpc gives it and counted nowhere, since counting
// each message would let one long stream outweigh many unary calls, and
// counting the stream's end as well would give one call two outcomes. So
// the stream breakers see a server that is down or unreachable (grpc fails
// NewStream with Unavailable) but not one that accepts streams and then
// fails them, whose status reaches the client only at the first RecvMsg:
// protect such a method on the server (Server), or with a unary call
// before the stream. In a Thread group, a stream call with grpc.Header,
// grpc.Trailer or grpc.Peer call options is refused (InvalidArgument): a
// detached establishment would write them late; a stream has Header and
// Trailer methods for that.
//
// # Server
//
// A Server gives each method a group of its own (named by its full method)
// in which the handler is the command: Group.MaxConcurrent bounds the
// handlers of the method running at once (a per-method bulkhead; for a
// streaming method, the streams), Group.RateLimit limits the method's
// calls and Group.KeyedRateLimit each caller's, by the key ServerConfig.Key
// takes from the RPC (KeyByPeer, KeyByMetadata), and Group.Priority sheds
// the less important calls first when the bulkhead fills up, by the
// priority ServerConfig.Priority takes from the RPC (PriorityByMetadata).
// Server groups are
// Semaphore groups: the handler runs on its RPC's goroutine. A call the
// Server refuses never reaches the handler: a rate-limited one is answered
// ResourceExhausted, a short-circuited, rejected or shed one Unavailable,
// each with the pushback trailer when bulwark knows the delay (the
// limiter's wait, the breaker's remaining open time), or else
// ServerConfig.Pushback if set, so that a gRPC client retries no sooner. The handler's own answers pass through unchanged and are
// classified for the method's breakers like a client's (ServerConfig.
// Classes); a handler that panics is a FAILURE, logged with its stack by
// the group and answered Internal.
//
// A stream handler is one call from its start to its end, and its outcome
// is the handler's error.
package grpcguard
