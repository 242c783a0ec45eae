package grpcguard

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// PushbackMetadata is the trailer key by which a gRPC server tells a client
// when to try again (gRFC A6): a whole number of milliseconds, or a
// negative or malformed value for "do not retry". The client interceptors
// read it from the trailer of a failed call as an HTTP client reads
// Retry-After; the server interceptors send it with the refusals whose
// delay they know.
const PushbackMetadata = "grpc-retry-pushback-ms"

// ErrTooManyGroups is matched by the error of a call whose group would be
// new while the interceptor already has MaxGroups groups open (see
// ClientConfig.MaxGroups and ServerConfig.MaxGroups). Its status code is
// ResourceExhausted.
var ErrTooManyGroups = errors.New("grpcguard: too many groups")

// rpcError is a command's Run error for a call that ended with a status
// the classes count as a failure or a bad request: the error as grpc
// gave it, and what else the call received.
type rpcError struct {
	err  error     // as the invoker, streamer or handler returned it
	recv *received // the call's header, trailer and peer (client calls)
}

func (e *rpcError) Error() string { return e.err.Error() }

func (e *rpcError) Unwrap() error { return e.err }

// RetryAfterDelay returns the server's pushback (see PushbackMetadata):
// its delay, the largest time.Duration for "do not retry" (so that a retry
// never waits for it: retry.Config.MaxRetryAfter), or 0 when the
// trailer had none. command.Error.RetryAfter reads it.
func (e *rpcError) RetryAfterDelay() time.Duration {
	if e.recv == nil {
		return 0
	}
	return parsePushback(e.recv.trailer)
}

// parsePushback reads the pushback of a trailer (see RetryAfterDelay). One
// value that is a non-negative number of milliseconds is a delay; several
// values, a negative or a malformed one are "do not retry", as grpc-go's
// own retries read them.
func parsePushback(md metadata.MD) time.Duration {
	v := md.Get(PushbackMetadata)
	if len(v) == 0 {
		return 0
	}
	ms, err := strconv.ParseInt(v[0], 10, 64)
	if len(v) > 1 || err != nil || ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// formatPushback returns d as a pushback value: milliseconds, rounded up,
// at least 1 (a pushback of 0 means "at once").
func formatPushback(d time.Duration) string {
	ms := d / time.Millisecond
	if d%time.Millisecond > 0 {
		ms++
	}
	return strconv.FormatInt(int64(max(ms, 1)), 10)
}

// statusError is an error with a gRPC status: the status that
// status.FromError, status.Code and grpc's server read from it, and the
// error errors.Is and errors.As see through it (a *command.Error, or
// ErrTooManyGroups).
type statusError struct {
	st  *status.Status
	err error
}

func (e *statusError) Error() string { return e.err.Error() }

func (e *statusError) Unwrap() error { return e.err }

// GRPCStatus returns the error's status.
func (e *statusError) GRPCStatus() *status.Status { return e.st }

// answerOf returns out, the error the caller of a call gets when Execute
// returned err (ctx is the caller's):
//
//   - for a bad request, the dependency's own error, as it gave it;
//   - for a failure, an error with the dependency's status (or Internal's,
//     for a panic) through which errors.As reaches the *command.Error;
//   - for a call bulwark ended itself, one with the refusal's status (see
//     refusal), and that *command.Error as refused.
//
// got is the dependency's answer (a bad request or a failure), which came
// before Execute returned; nil when there was none in time.
func answerOf(ctx context.Context, err error) (got *rpcError, refused *command.Error, out error) {
	var e *command.Error
	if !errors.As(err, &e) { // BAD_REQUEST: Run's error as Run returned it
		if errors.As(err, &got) {
			return got, nil, got.err
		}
		return nil, nil, status.Convert(err).Err() // a panic that GroupConfig.IsBadRequest accepted
	}
	switch {
	case e.Event != metrics.Failure:
		return nil, e, &statusError{st: refusal(ctx, e), err: e}
	case !errors.As(e.Err, &got):
		return nil, nil, &statusError{st: panicked(e), err: e}
	}
	return got, nil, &statusError{st: status.Convert(got.err), err: e}
}

// refusal returns the status of a call that did not get the dependency's
// answer: e's outcome is not FAILURE or BAD_REQUEST.
//
//   - SHORT_CIRCUITED, THREAD_POOL_REJECTED, SEMAPHORE_REJECTED, THROTTLED,
//     PRIORITY_REJECTED, READ_ONLY (a breaker open, a bulkhead full or
//     closed, the client-side throttle, a call shed by priority, a write
//     refused in read-only mode): Unavailable, "not now, try later".
//   - RATE_LIMITED: ResourceExhausted, the code of a quota.
//   - TIMEOUT, QUEUE_TIMEOUT: DeadlineExceeded.
//   - CANCELLED: Canceled, or DeadlineExceeded when ctx, the caller's
//     context, ended at its deadline.
func refusal(ctx context.Context, e *command.Error) *status.Status {
	var code codes.Code
	switch e.Event {
	case metrics.RateLimited:
		code = codes.ResourceExhausted
	case metrics.Timeout, metrics.QueueTimeout:
		code = codes.DeadlineExceeded
	case metrics.Cancelled:
		code = codes.Canceled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			code = codes.DeadlineExceeded
		}
	default:
		code = codes.Unavailable
	}
	msg := callName(e) + ": " + strings.ToLower(e.Event.String())
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return status.New(code, msg)
}

// panicked is the status of a call whose Run panicked (in an inner
// interceptor, the invoker or a handler). The panic and its stack are in
// the group's log, never in the answer.
func panicked(e *command.Error) *status.Status {
	return status.New(codes.Internal, callName(e)+": panic (see the log)")
}

// callName names e's call in a status message: "bulwark: ", its group and
// its command, or only the group when its name ends with the command's
// (a server's method group, a client's ByMethod group).
func callName(e *command.Error) string {
	if strings.HasSuffix(e.Group, e.Command) {
		return "bulwark: " + e.Group
	}
	return "bulwark: " + e.Group + " " + e.Command
}
