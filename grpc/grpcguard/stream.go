package grpcguard

import (
	"context"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/bulwark-go/bulwark/command"
)

// Stream is the stream client interceptor (a grpc.StreamClientInterceptor).
// A stream's call, the command that its breakers, bulkhead and timeout
// guard and that has one outcome, is establishing the stream: the
// streamer's NewStream, named method in its group. Once established, the
// stream lives under the caller's ctx, past the group's timeout, and its
// messages are the caller's business: their errors are returned as grpc
// gives them and counted nowhere (see the package documentation).
//
// In a Thread group the establishment may be left detached at its
// deadline, so the grpc.Header, grpc.Trailer and grpc.Peer call options,
// which grpc would write from the detached worker, are refused there with
// InvalidArgument: read a stream's header and trailer with its Header and
// Trailer methods.
func (c *Client) Stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	g, err := c.Group(cc, method)
	if err != nil {
		return nil, err
	}
	if g.Config().Strategy == command.Thread {
		if _, s := splitOptions(opts); s.has() {
			err := fmt.Errorf("grpcguard: %s: the stream's group %s is a Thread group, where grpc.Header, grpc.Trailer and grpc.Peer call options could be written after the caller left: use the stream's Header and Trailer methods", method, g.Name())
			return nil, &statusError{st: status.New(codes.InvalidArgument, err.Error()), err: err}
		}
	}
	s := &streamCall{client: c, parent: ctx, desc: desc, cc: cc, method: method, streamer: streamer, opts: opts}
	r, err := command.Execute(ctx, g, s, command.WithName(method))
	if err == nil {
		if r.err != nil {
			return nil, r.err
		}
		return r.cs, nil
	}
	_, _, out := answerOf(ctx, err)
	return nil, out
}

// streamCall is the establishment of one stream as a command.
type streamCall struct {
	client   *Client
	parent   context.Context // the caller's: the stream's lifetime
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption
}

// established is the result of a stream's establishment: the stream, or
// the streamer's error when its class is Success.
type established struct {
	cs  *clientStream
	err error
}

// Run establishes the stream on a context of its own, derived from the
// caller's and cancelled if Run's ends (the timeout, the caller leaving)
// before the streamer returns. A probe's stream is tagged with
// ProbeMetadata.
func (s *streamCall) Run(ctx context.Context) (established, error) {
	sctx, cancel := context.WithCancel(outgoing(ctx, s.parent))
	stop := context.AfterFunc(ctx, cancel)
	cs, err := s.streamer(sctx, s.desc, s.cc, s.method, s.opts...)
	if !stop() {
		// Run's context ended first: the call is a TIMEOUT or CANCELLED
		// whatever came back, and the stream, if any, is cancelled.
		return established{}, context.Cause(ctx)
	}
	if err != nil {
		cancel()
		settle(ctx, err)
		ok, fail := s.client.classes.judge(err, &rpcError{})
		return established{err: ok}, fail
	}
	return established{cs: &clientStream{ClientStream: cs, cancel: cancel}}, nil
}

// Discard cancels a stream that was established too late for its caller.
func (s *streamCall) Discard(r established) {
	if r.cs != nil {
		r.cs.cancel()
	}
}

// clientStream is an established stream. It releases the context the
// stream was made on once the stream is over: when RecvMsg returns an
// error (io.EOF at the end), or Header or SendMsg an error other than
// io.EOF (grpc's own rules for a finished stream); until then the caller's
// ctx bounds it, as without the interceptor.
type clientStream struct {
	grpc.ClientStream
	cancel context.CancelFunc
}

func (s *clientStream) Header() (metadata.MD, error) {
	md, err := s.ClientStream.Header()
	if err != nil && err != io.EOF {
		s.cancel()
	}
	return md, err
}

func (s *clientStream) SendMsg(m any) error {
	err := s.ClientStream.SendMsg(m)
	if err != nil && err != io.EOF {
		s.cancel()
	}
	return err
}

func (s *clientStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		s.cancel()
	}
	return err
}
