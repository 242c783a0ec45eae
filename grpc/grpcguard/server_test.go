package grpcguard

import (
	"context"
	"io"
	"sync/atomic"
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
	"github.com/bulwark-go/bulwark/ratelimit"
)

// protected serves impl behind a new Server with cfg in reg and returns a
// plain client (no client interceptor) of it, and the Server.
func protected(t testing.TB, reg *command.Registry, impl testgrpc.TestServiceServer, cfg ServerConfig) (testgrpc.TestServiceClient, *Server) {
	t.Helper()
	client, s, _ := protectedAt(t, reg, impl, cfg)
	return client, s
}

// protectedAt is protected that also returns the server's address.
func protectedAt(t testing.TB, reg *command.Registry, impl testgrpc.TestServiceServer, cfg ServerConfig) (testgrpc.TestServiceClient, *Server, string) {
	t.Helper()
	s, err := NewServer(reg, cfg)
	require.NoError(t, err)
	addr := serve(t, impl, grpc.ChainUnaryInterceptor(s.Unary), grpc.ChainStreamInterceptor(s.Stream))
	return testgrpc.NewTestServiceClient(dial(t, addr)), s, addr
}

func TestServerBulkheadIsPerMethod(t *testing.T) {
	reg := newTestRegistry(t, nil)
	srv := &echoServer{gate: make(chan struct{})}
	client, s := protected(t, reg, srv, ServerConfig{Group: command.GroupConfig{MaxConcurrent: 1}})
	held := make(chan error)
	go func() {
		_, err := client.UnaryCall(withMetadata(context.Background(), holdKey, "1"), &testgrpc.SimpleRequest{})
		held <- err
	}()
	require.Eventually(t, func() bool { return srv.calls.Load() == 1 }, 5*time.Second, time.Millisecond)
	var trailer metadata.MD
	_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{}, grpc.Trailer(&trailer))
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "bulwark: /grpc.testing.TestService/UnaryCall: semaphore_rejected: isolation: bulkhead full")
	assert.Empty(t, trailer.Get(PushbackMetadata), "a full bulkhead knows no delay")
	_, err = client.EmptyCall(context.Background(), &testgrpc.Empty{})
	assert.NoError(t, err, "another method has its own bulkhead")
	close(srv.gate)
	require.NoError(t, <-held)

	g, err := s.Group(unaryMethod)
	require.NoError(t, err)
	n := counts(t, g, unaryMethod)
	assert.Equal(t, int64(1), n[metrics.Success])
	assert.Equal(t, int64(1), n[metrics.SemaphoreRejected])
	assert.Equal(t, int64(2), srv.calls.Load(), "the held call and EmptyCall: the refused call never reached its handler")
	assert.Equal(t, command.NoTimeout, g.Config().Timeout, "server groups have no timeout by default")
	assert.Equal(t, command.Semaphore, g.Config().Strategy)
}

func TestServerRateLimitsEachCaller(t *testing.T) {
	clock := new(metrics.ManualClock)
	reg := newTestRegistry(t, clock)
	perTenant, err := ratelimit.NewPerKey(ratelimit.PerKeyConfig{MaxKeys: 100, New: func(string) (ratelimit.Limiter, error) {
		return ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 0.5, Burst: 1, Clock: clock})
	}})
	require.NoError(t, err)
	srv := &echoServer{}
	client, _, addr := protectedAt(t, reg, srv, ServerConfig{Group: command.GroupConfig{KeyedRateLimit: perTenant}, Key: KeyByMetadata("x-tenant")})
	tenant := func(name string) context.Context { return withMetadata(context.Background(), "x-tenant", name) }

	_, err = client.UnaryCall(tenant("a"), &testgrpc.SimpleRequest{})
	require.NoError(t, err)
	var trailer metadata.MD
	_, err = client.EmptyCall(tenant("a"), &testgrpc.Empty{}, grpc.Trailer(&trailer))
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "the quota is per caller, across methods")
	assert.Equal(t, []string{"2000"}, trailer.Get(PushbackMetadata), "a token every 2 s")
	_, err = client.UnaryCall(tenant("b"), &testgrpc.SimpleRequest{})
	assert.NoError(t, err, "another caller has its own quota")
	assert.Equal(t, int64(2), srv.calls.Load())

	// A bulwark client reads the pushback as its Retry-After.
	clock.Advance(time.Second)
	bulwarkClient, _, _ := guarded(t, newTestRegistry(t, nil), addr, ClientConfig{})
	_, err = bulwarkClient.UnaryCall(tenant("a"), &testgrpc.SimpleRequest{})
	require.Equal(t, codes.ResourceExhausted, status.Code(err))
	assert.Equal(t, metrics.Failure, commandError(t, err).Event)
	assert.Equal(t, time.Second, commandError(t, err).RetryAfter())
}

func TestServerShortCircuitAnswersWithPushback(t *testing.T) {
	clock := new(metrics.ManualClock)
	reg := newTestRegistry(t, clock)
	srv := &echoServer{}
	client, _ := protected(t, reg, srv, ServerConfig{Group: command.GroupConfig{
		CommandBreaker: circuit.Config{MinRequests: 2, OpenDuration: 5 * time.Second},
	}})
	for range 2 {
		_, err := client.UnaryCall(context.Background(), failWith(codes.Internal, "database down"))
		require.Equal(t, status.Error(codes.Internal, "database down").Error(), err.Error(), "the handler's answer, as it gave it")
	}
	clock.Advance(1500 * time.Millisecond)
	var trailer metadata.MD
	_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{}, grpc.Trailer(&trailer))
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "short_circuited: circuit: open")
	assert.Equal(t, []string{"3500"}, trailer.Get(PushbackMetadata), "the breaker's remaining open time")
	assert.Equal(t, int64(2), srv.calls.Load())
}

func TestServerPassesHandlerAnswersThrough(t *testing.T) {
	reg := newTestRegistry(t, nil)
	client, s := protected(t, reg, &echoServer{}, ServerConfig{Classes: map[codes.Code]Class{codes.NotFound: Success}})
	resp, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("x")}})
	require.NoError(t, err)
	assert.Equal(t, "x", string(resp.GetPayload().GetBody()))
	for _, code := range []codes.Code{codes.NotFound, codes.InvalidArgument, codes.Unavailable} {
		_, err := client.UnaryCall(context.Background(), failWith(code, "said the handler"))
		assert.Equal(t, status.Error(code, "said the handler").Error(), err.Error())
	}
	g, err := s.Group(unaryMethod)
	require.NoError(t, err)
	n := counts(t, g, unaryMethod)
	assert.Equal(t, int64(2), n[metrics.Success], "OK, and NotFound by the override")
	assert.Equal(t, int64(1), n[metrics.BadRequest])
	assert.Equal(t, int64(1), n[metrics.Failure])
}

// panicServer's UnaryCall panics.
type panicServer struct {
	testgrpc.UnimplementedTestServiceServer
}

func (panicServer) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	panic("secret internals")
}

func TestServerAnswersAPanicWithInternal(t *testing.T) {
	reg := newTestRegistry(t, nil)
	client, s := protected(t, reg, panicServer{}, ServerConfig{})
	_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	assert.Equal(t, codes.Internal, status.Code(err))
	assert.NotContains(t, status.Convert(err).Message(), "secret", "the panic stays in the server's log")
	g, err := s.Group(unaryMethod)
	require.NoError(t, err)
	assert.Equal(t, int64(1), counts(t, g, unaryMethod)[metrics.Failure])
}

func TestServerStreamBulkheadBoundsOpenStreams(t *testing.T) {
	reg := newTestRegistry(t, nil)
	client, s := protected(t, reg, &echoServer{}, ServerConfig{Group: command.GroupConfig{MaxConcurrent: 1}})
	first, err := client.FullDuplexCall(context.Background())
	require.NoError(t, err)
	require.NoError(t, first.Send(&testgrpc.StreamingOutputCallRequest{}))
	_, err = first.Recv()
	require.NoError(t, err, "the first stream is open and running")

	second, err := client.FullDuplexCall(context.Background())
	require.NoError(t, err, "the client learns of the refusal at its first receive")
	_, err = second.Recv()
	assert.Equal(t, codes.Unavailable, status.Code(err))

	require.NoError(t, first.CloseSend())
	_, err = first.Recv()
	require.Equal(t, io.EOF, err)
	g, err := s.Group(duplexMethod)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return counts(t, g, duplexMethod)[metrics.Success] == 1 }, 5*time.Second, time.Millisecond,
		"the first stream's handler ends as a success")
	third, err := client.FullDuplexCall(context.Background())
	require.NoError(t, err)
	require.NoError(t, third.CloseSend())
	_, err = third.Recv()
	assert.Equal(t, io.EOF, err, "the slot is free again")
	assert.Equal(t, int64(1), counts(t, g, duplexMethod)[metrics.SemaphoreRejected])
}

func TestServerTimeoutBoundsHandlers(t *testing.T) {
	reg := newTestRegistry(t, nil)
	client, _ := protected(t, reg, &echoServer{}, ServerConfig{Group: command.GroupConfig{Timeout: 30 * time.Millisecond}})
	_, err := client.UnaryCall(withMetadata(context.Background(), sleepKey, "100ms"), &testgrpc.SimpleRequest{})
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), ": timeout: context deadline exceeded")
}

func TestServerRefusesAThreadGroup(t *testing.T) {
	reg := newTestRegistry(t, nil)
	_, err := reg.NewGroup(unaryMethod, command.GroupConfig{})
	require.NoError(t, err)
	srv := &echoServer{}
	client, _ := protected(t, reg, srv, ServerConfig{})
	_, err = client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	assert.Equal(t, codes.Internal, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "must be a Semaphore group, not THREAD")
	assert.Zero(t, srv.calls.Load())
}

func TestServerBoundsItsGroups(t *testing.T) {
	reg := newTestRegistry(t, nil)
	client, _ := protected(t, reg, &echoServer{}, ServerConfig{MaxGroups: 1})
	_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	require.NoError(t, err)
	_, err = client.EmptyCall(context.Background(), &testgrpc.Empty{})
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "too many groups")
}

func TestKeyByPeer(t *testing.T) {
	reg := newTestRegistry(t, nil)
	var key atomic.Pointer[string]
	client, _ := protected(t, reg, &echoServer{}, ServerConfig{Key: func(ctx context.Context, method string) string {
		k := KeyByPeer(ctx, method)
		key.Store(&k)
		return k
	}})
	_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", *key.Load())
	assert.Empty(t, KeyByPeer(context.Background(), unaryMethod))
	assert.Empty(t, KeyByMetadata("x-tenant")(context.Background(), unaryMethod))
}

func TestServerConfigErrorsNameTheFieldAndValue(t *testing.T) {
	reg := newTestRegistry(t, nil)
	perKey := keyedLimiter{}
	for _, tc := range []struct {
		cfg  ServerConfig
		want string
	}{
		{ServerConfig{Group: command.GroupConfig{QueueSize: 3}}, "ServerConfig.Group.QueueSize 3 must be 0"},
		{ServerConfig{Group: command.GroupConfig{KeyedRateLimit: perKey}}, "ServerConfig.Group.KeyedRateLimit is set but ServerConfig.Key is nil"},
		{ServerConfig{MaxGroups: -5}, "ServerConfig.MaxGroups -5"},
		{ServerConfig{Classes: map[codes.Code]Class{codes.Internal: 3}}, "ServerConfig.Classes[Internal] Class(3)"},
		{ServerConfig{Group: command.GroupConfig{Timeout: -time.Second}}, "ServerConfig.Group: command: invalid config: Timeout -1s"},
	} {
		_, err := NewServer(reg, tc.cfg)
		assert.ErrorIs(t, err, command.ErrInvalidConfig)
		assert.ErrorContains(t, err, tc.want)
	}
	_, err := NewServer(nil, ServerConfig{})
	assert.ErrorIs(t, err, command.ErrInvalidConfig)
}

// keyedLimiter admits every call.
type keyedLimiter struct{}

func (keyedLimiter) AdmitKey(context.Context, string) error { return nil }

// TestServerCallersDeadlineIsNeverTheHandlersFailure: a handler that
// returns DeadlineExceeded because the RPC's deadline (the client's) has
// passed, a moment before the RPC context's timer fires, is CANCELLED, not
// a FAILURE counted by the method's breakers. The interceptor is called
// directly with a lagging context (see lateContext), which grpc's own
// server cannot be made to hand over.
func TestServerCallersDeadlineIsNeverTheHandlersFailure(t *testing.T) {
	reg := newTestRegistry(t, nil)
	s, err := NewServer(reg, ServerConfig{})
	require.NoError(t, err)
	handler := func(ctx context.Context, _ any) (any, error) {
		deadline, _ := ctx.Deadline()
		time.Sleep(time.Until(deadline) + 5*time.Millisecond)
		return nil, status.Error(codes.DeadlineExceeded, "the downstream call ran out of time")
	}
	ctx := newLateContext(t, 20*time.Millisecond, 100*time.Millisecond)
	_, err = s.Unary(ctx, &testgrpc.SimpleRequest{}, &grpc.UnaryServerInfo{FullMethod: unaryMethod}, handler)
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
	g, err := s.Group(unaryMethod)
	require.NoError(t, err)
	assert.Equal(t, int64(1), counts(t, g, unaryMethod)[metrics.Cancelled])
	b, _ := g.CommandBreaker(unaryMethod)
	assert.Zero(t, b.Snapshot().Health.Requests)
}
