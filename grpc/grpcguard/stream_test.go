package grpcguard

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// A stream's call is its establishment; the stream then lives past the
// group's timeout, and its messages are not counted. The timeout is 1 s,
// not tens of milliseconds: establishing a stream on a loaded machine
// under -race took more than 50 ms, and the test is of what happens after.
func TestStreamOutlivesTheGroupTimeout(t *testing.T) {
	for _, strategy := range strategies {
		t.Run(strategy.String(), func(t *testing.T) {
			reg := newTestRegistry(t, nil)
			addr := serve(t, &echoServer{})
			client, _, conn := guarded(t, reg, addr, ClientConfig{Group: command.GroupConfig{Strategy: strategy, Timeout: time.Second}})
			ready(t, conn)

			// Server streaming: five messages 300 ms apart, 1.5 s in all.
			var params []*testgrpc.ResponseParameters
			for range 5 {
				params = append(params, &testgrpc.ResponseParameters{Size: 3, IntervalUs: 300_000})
			}
			out, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{ResponseParameters: params})
			require.NoError(t, err)
			for i := range 5 {
				m, err := out.Recv()
				require.NoError(t, err, "message %d", i)
				assert.Len(t, m.GetPayload().GetBody(), 3)
			}
			_, err = out.Recv()
			assert.Equal(t, io.EOF, err)

			// Bidi: messages sent after the timeout still flow.
			duplex, err := client.FullDuplexCall(context.Background())
			require.NoError(t, err)
			time.Sleep(1200 * time.Millisecond)
			for _, word := range []string{"one", "two"} {
				require.NoError(t, duplex.Send(&testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: []byte(word)}}))
				m, err := duplex.Recv()
				require.NoError(t, err)
				assert.Equal(t, word, string(m.GetPayload().GetBody()))
			}
			require.NoError(t, duplex.CloseSend())
			_, err = duplex.Recv()
			assert.Equal(t, io.EOF, err)

			// A stream that fails at its end: returned as is, not counted.
			failing, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{
				ResponseStatus: &testgrpc.EchoStatus{Code: int32(codes.Internal), Message: "broke mid-stream"},
			})
			require.NoError(t, err)
			_, err = failing.Recv()
			assert.Equal(t, status.Error(codes.Internal, "broke mid-stream").Error(), err.Error())

			g := group(t, reg, conn.CanonicalTarget())
			assert.Equal(t, int64(2), counts(t, g, outputMethod)[metrics.Success], "two establishments")
			assert.Equal(t, int64(2), counts(t, g, outputMethod).Calls(), "the stream's end is no second outcome")
			assert.Equal(t, int64(1), counts(t, g, duplexMethod)[metrics.Success])
		})
	}
}

func TestStreamToADownServerFailsThenShortCircuits(t *testing.T) {
	for _, strategy := range strategies {
		t.Run(strategy.String(), func(t *testing.T) {
			reg := newTestRegistry(t, nil)
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			addr := lis.Addr().String()
			require.NoError(t, lis.Close()) // nothing listens there: connections are refused
			client, _, conn := guarded(t, reg, addr, ClientConfig{Group: command.GroupConfig{
				Strategy: strategy, Timeout: 5 * time.Second, CommandBreaker: circuit.Config{MinRequests: 3},
			}})
			for range 3 {
				_, err := client.FullDuplexCall(context.Background())
				require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
				assert.Equal(t, metrics.Failure, commandError(t, err).Event)
			}
			_, err = client.FullDuplexCall(context.Background())
			assert.Equal(t, codes.Unavailable, status.Code(err))
			assert.ErrorIs(t, err, command.ErrRefused)
			n := counts(t, group(t, reg, conn.CanonicalTarget()), duplexMethod)
			assert.Equal(t, int64(3), n[metrics.Failure])
			assert.Equal(t, int64(1), n[metrics.ShortCircuited])
		})
	}
}

// An establishment that outlives the timeout (behind a stubborn layer that
// makes the stream, then dawdles before returning it) is a TIMEOUT, and the
// stream it made is cancelled with the call's context, never left open.
func TestStreamEstablishmentTimesOut(t *testing.T) {
	for _, strategy := range strategies {
		t.Run(strategy.String(), func(t *testing.T) {
			reg := newTestRegistry(t, nil)
			addr := serve(t, &echoServer{})
			type made struct {
				cs  grpc.ClientStream
				err error
			}
			late := make(chan made, 1)
			slow := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				cs, err := streamer(ctx, desc, cc, method, opts...)
				time.Sleep(400 * time.Millisecond)
				late <- made{cs, err}
				return cs, err
			}
			c, err := NewClient(reg, ClientConfig{Group: command.GroupConfig{Strategy: strategy, Timeout: 200 * time.Millisecond}})
			require.NoError(t, err)
			client := testgrpc.NewTestServiceClient(dial(t, addr, grpc.WithChainStreamInterceptor(c.Stream, slow)))
			_, err = client.EmptyCall(context.Background(), &testgrpc.Empty{}) // connects: the stream is then made at once
			require.NoError(t, err)
			_, err = client.FullDuplexCall(context.Background())
			assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
			assert.Equal(t, metrics.Timeout, commandError(t, err).Event)
			m := <-late
			require.NoError(t, m.err, "the stream was made within the timeout")
			require.Eventually(t, func() bool { return m.cs.Context().Err() != nil }, 5*time.Second, time.Millisecond)
			assert.Equal(t, codes.Canceled, status.Code(m.cs.RecvMsg(new(testgrpc.StreamingOutputCallResponse))))
		})
	}
}

func TestStreamThreadGroupRefusesMetadataCallOptions(t *testing.T) {
	reg := newTestRegistry(t, nil)
	addr := serve(t, &echoServer{})
	client, _, _ := guarded(t, reg, addr, ClientConfig{})
	var header metadata.MD
	_, err := client.FullDuplexCall(context.Background(), grpc.Header(&header))
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.ErrorContains(t, err, "use the stream's Header and Trailer methods")

	semaphore, _, _ := guarded(t, reg, addr, ClientConfig{GroupBy: ByMethod, Group: command.GroupConfig{Strategy: command.Semaphore}})
	s, err := semaphore.FullDuplexCall(context.Background(), grpc.Header(&header))
	require.NoError(t, err)
	require.NoError(t, s.Send(&testgrpc.StreamingOutputCallRequest{}))
	_, err = s.Recv()
	require.NoError(t, err)
	require.NoError(t, s.CloseSend())
	_, err = s.Recv()
	assert.Equal(t, io.EOF, err)
	assert.Equal(t, []string{"application/grpc"}, header.Get("content-type"), "a Semaphore group passes them to grpc")
}

func TestStreamProbeIsTagged(t *testing.T) {
	clock := new(metrics.ManualClock)
	reg := newTestRegistry(t, clock)
	probes := make(chan bool, 10)
	record := grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		md, _ := metadata.FromIncomingContext(ss.Context())
		probes <- len(md.Get(ProbeMetadata)) > 0
		return handler(srv, ss)
	})
	addr := serve(t, &echoServer{}, record)
	// An inner layer fails the first two establishments, as a server
	// that is down would, and lets the others through.
	refusals := 2
	flaky := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if refusals > 0 {
			refusals--
			return nil, status.Error(codes.Unavailable, "connection refused")
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
	c, err := NewClient(reg, ClientConfig{Group: command.GroupConfig{
		Strategy: command.Semaphore, CommandBreaker: circuit.Config{MinRequests: 2, OpenDuration: time.Second, HalfOpenSuccesses: 2},
	}})
	require.NoError(t, err)
	client := testgrpc.NewTestServiceClient(dial(t, addr, grpc.WithChainStreamInterceptor(c.Stream, flaky)))
	open := func() error {
		s, err := client.FullDuplexCall(context.Background())
		if err != nil {
			return err
		}
		require.NoError(t, s.CloseSend())
		_, err = s.Recv()
		require.Equal(t, io.EOF, err)
		return nil
	}
	for range 2 {
		require.Equal(t, codes.Unavailable, status.Code(open()))
	}
	require.ErrorIs(t, open(), command.ErrRefused)
	clock.Advance(time.Second)
	for range 3 {
		require.NoError(t, open())
	}
	assert.Equal(t, []bool{true, true, false}, []bool{<-probes, <-probes, <-probes},
		"the two half-open probes are tagged, the call after the breaker closed is not")
}
