package grpcguard

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bulwark-go/bulwark/command"
)

// Class is what a gRPC status code says about the dependency that answered
// it: how the breakers count the call, and whether it may be retried.
type Class uint8

const (
	// Failure: the dependency failed the call. It is a FAILURE, counted
	// against the dependency's health, and retried when the group retries
	// (retry.Config) and the method is idempotent.
	Failure Class = iota
	// BadRequest: the caller's fault, or no evidence about the dependency
	// either way. It is a BAD_REQUEST: returned as is, not counted by the
	// breakers, never retried, no fallback.
	BadRequest
	// Success: the dependency did its job. The caller still gets the
	// status error, but the breakers count a SUCCESS.
	Success
)

// String returns "failure", "bad_request" or "success".
func (c Class) String() string {
	switch c {
	case Failure:
		return "failure"
	case BadRequest:
		return "bad_request"
	case Success:
		return "success"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// DefaultClass returns the class of a status code unless a config's
// Classes says otherwise:
//
//   - Failure: Unavailable, DeadlineExceeded (the dependency's own; a
//     deadline of the call's is a TIMEOUT or CANCELLED before any code is
//     read), ResourceExhausted, Internal, Unknown (what grpc-go makes of a
//     handler's error that is not a status), DataLoss, and any code
//     beyond the 17 that gRPC defines.
//   - BadRequest: InvalidArgument, NotFound, AlreadyExists,
//     PermissionDenied, Unauthenticated, FailedPrecondition, OutOfRange
//     (the request is wrong), Aborted (a conflict with another request,
//     to be retried at a higher level), Unimplemented (the caller asked for
//     a method the server lacks: a deployment mistake, not a sick server)
//     and Canceled (a cancellation that neither the caller's context nor
//     the call's timeout made, such as a server cancelling on its own:
//     evidence of nothing).
//   - Success: OK.
func DefaultClass(code codes.Code) Class {
	switch code {
	case codes.OK:
		return Success
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
		codes.Unauthenticated, codes.FailedPrecondition, codes.OutOfRange, codes.Aborted,
		codes.Unimplemented, codes.Canceled:
		return BadRequest
	}
	return Failure
}

// classes classifies the errors of calls: a config's overrides over
// DefaultClass.
type classes map[codes.Code]Class

// newClasses checks the overrides of a config's Classes field, named field
// in errors, and returns a copy of them.
func newClasses(field string, overrides map[codes.Code]Class) (classes, error) {
	for _, code := range slices.Sorted(maps.Keys(overrides)) {
		switch c := overrides[code]; {
		case code == codes.OK:
			return nil, fmt.Errorf("%w: grpcguard: %s[%v] is set to %v, but OK is not an error and has no class", command.ErrInvalidConfig, field, code, c)
		case c > Success:
			return nil, fmt.Errorf("%w: grpcguard: %s[%v] %v is not a known Class (Failure, BadRequest, Success)", command.ErrInvalidConfig, field, code, c)
		}
	}
	return maps.Clone(overrides), nil
}

// of returns the class of err, an error of a call.
func (cs classes) of(err error) Class {
	code := status.Code(err)
	if c, ok := cs[code]; ok {
		return c
	}
	return DefaultClass(code)
}

// judge returns what a command's Run returns for err, the non-nil error of
// an invoker, a streamer or a handler: for a Success, err as the value's
// error (ok) and no Run error; otherwise an *rpcError holding err (marked
// with command.BadRequest for a BadRequest) as Run's error (fail).
func (cs classes) judge(err error, re *rpcError) (ok, fail error) {
	re.err = err
	switch cs.of(err) {
	case Success:
		return err, nil
	case BadRequest:
		return nil, command.BadRequest(re)
	}
	return nil, re
}

// settle waits until ctx, Run's context, ends when err, Run's error, is a
// DeadlineExceeded that came at or after ctx's deadline. grpc sends the
// deadline along to the server, whose timer may end the call a moment
// before ctx's own timer fires (under load, timers lag): the call ran into
// its own deadline, and Execute, which reads ctx, must see the TIMEOUT (or,
// for the caller's deadline, the CANCELLED) that it is, never a FAILURE
// of the dependency. Past its deadline, ctx is done at once or soon.
func settle(ctx context.Context, err error) {
	if deadline, ok := ctx.Deadline(); ok && !time.Now().Before(deadline) && status.Code(err) == codes.DeadlineExceeded {
		<-ctx.Done()
	}
}
