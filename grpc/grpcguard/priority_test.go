package grpcguard

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/priority"
	"github.com/bulwark-go/bulwark/metrics"
)

// TestServerShedsByPriority: against a real gRPC server on loopback, with
// the method's bulkhead half full, a P3 call (by its metadata) is shed
// before its handler, answered Unavailable with the configured pushback,
// while a P0 call goes through; the shed call is PRIORITY_REJECTED.
func TestServerShedsByPriority(t *testing.T) {
	reg := newTestRegistry(t, nil)
	srv := &echoServer{gate: make(chan struct{})}
	client, s := protected(t, reg, srv, ServerConfig{
		Group:    command.GroupConfig{MaxConcurrent: 2, Priority: priority.Config{Reserve: [4]float64{0, 0.1, 0.25, 0.5}}},
		Priority: PriorityByMetadata("x-priority", priority.P3),
		Pushback: 250 * time.Millisecond,
	})
	held := make(chan error)
	go func() {
		_, err := client.UnaryCall(withMetadata(context.Background(), holdKey, "1", "x-priority", "P0"), &testgrpc.SimpleRequest{})
		held <- err
	}()
	require.Eventually(t, func() bool { return srv.calls.Load() == 1 }, 5*time.Second, time.Millisecond)

	var trailer metadata.MD
	_, err := client.UnaryCall(withMetadata(context.Background(), "x-priority", "3"), &testgrpc.SimpleRequest{}, grpc.Trailer(&trailer))
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "priority_rejected: command: P3 shed")
	assert.Equal(t, []string{"250"}, trailer.Get(PushbackMetadata), "ServerConfig.Pushback")
	_, err = client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	assert.Equal(t, codes.Unavailable, status.Code(err), "no metadata: P3, PriorityByMetadata's missing")
	_, err = client.UnaryCall(withMetadata(context.Background(), "x-priority", "0"), &testgrpc.SimpleRequest{})
	assert.NoError(t, err, "P0 takes the last slot")
	close(srv.gate)
	require.NoError(t, <-held)

	g, err := s.Group(unaryMethod)
	require.NoError(t, err)
	n := counts(t, g, unaryMethod)
	assert.EqualValues(t, 2, n[metrics.PriorityRejected])
	assert.EqualValues(t, 2, n[metrics.Success])
	assert.EqualValues(t, 2, srv.calls.Load(), "the held call and P0's: the shed calls never reached their handler")
}

// TestServerStreamShedsByPriority: the stream interceptor sheds a stream
// by its priority as the unary one does a call.
func TestServerStreamShedsByPriority(t *testing.T) {
	reg := newTestRegistry(t, nil)
	srv := &echoServer{gate: make(chan struct{})}
	client, _ := protected(t, reg, srv, ServerConfig{
		Group:    command.GroupConfig{MaxConcurrent: 2, Priority: priority.Config{Reserve: [4]float64{0, 0, 0, 0.5}}},
		Priority: PriorityByMetadata("x-priority", priority.P0),
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open, err := client.FullDuplexCall(ctx) // held open: it takes one of the 2 slots
	require.NoError(t, err)
	require.NoError(t, open.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 1}}}))
	_, err = open.Recv()
	require.NoError(t, err)

	shed, err := client.FullDuplexCall(withMetadata(context.Background(), "x-priority", "P3"))
	require.NoError(t, err)
	_, err = shed.Recv()
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "priority_rejected")
	require.NoError(t, open.CloseSend())
	_, err = open.Recv()
	assert.ErrorIs(t, err, io.EOF, "the held stream ends as its handler returns")
}

func TestPriorityByMetadata(t *testing.T) {
	f := PriorityByMetadata("x-priority", priority.P2)
	for v, want := range map[string]priority.Level{"0": priority.P0, "P1": priority.P1, "p3": priority.P3, "9": priority.P2, "x": priority.P2} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-priority", v))
		assert.Equal(t, want, f(ctx, unaryMethod), "%q", v)
	}
	assert.Equal(t, priority.P2, f(context.Background(), unaryMethod), "no metadata")
}
