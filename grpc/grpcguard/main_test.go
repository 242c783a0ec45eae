package grpcguard

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// The tests run real gRPC servers and clients on loopback ports, with the
// TestService of grpc's own interop tests (grpc/interop/grpc_testing): its
// generated code ships in the grpc module, so no protoc is needed, no
// other module comes in, and it has all four kinds of RPC with messages
// that carry bytes, so that a late write into a caller's message shows.
// The tests' server, echoServer, obeys instructions in the request's
// metadata (sleepKey, holdKey, pushbackKey) and status (ResponseStatus).

// TestMain checks that no test leaves a goroutine behind. IgnoreCurrent
// skips the goroutines ants' package init starts for its default pool.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

const (
	unaryMethod  = "/grpc.testing.TestService/UnaryCall"
	emptyMethod  = "/grpc.testing.TestService/EmptyCall"
	outputMethod = "/grpc.testing.TestService/StreamingOutputCall"
	duplexMethod = "/grpc.testing.TestService/FullDuplexCall"

	sleepKey    = "x-test-sleep"    // the handler sleeps this long (a time.Duration), whatever its ctx
	holdKey     = "x-test-hold"     // the handler waits until the server's gate is closed
	pushbackKey = "x-test-pushback" // the handler sets this grpc-retry-pushback-ms trailer
)

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// newTestRegistry returns a registry on clock (a new manual clock if nil:
// the windows then keep every outcome) with a silent logger, closed with
// the test.
func newTestRegistry(t testing.TB, clock metrics.Clock) *command.Registry {
	t.Helper()
	if clock == nil {
		clock = new(metrics.ManualClock)
	}
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: discardLogger})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, reg.Close(ctx))
	})
	return reg
}

// echoServer is the tests' TestService. UnaryCall and EmptyCall answer the
// request's ResponseStatus, if it has one, else echo its payload; both
// first set the pushback trailer in pushbackKey, sleep for the duration in
// sleepKey and, with holdKey, wait for gate to be closed (or the call to
// end). StreamingOutputCall sends one message per ResponseParameter,
// each after its interval, then ResponseStatus's status. FullDuplexCall
// echoes each message until the client closes.
type echoServer struct {
	testgrpc.UnimplementedTestServiceServer
	calls   atomic.Int64           // UnaryCall and EmptyCall handlers started
	probes  atomic.Int64           // calls with ProbeMetadata
	payload atomic.Pointer[[]byte] // the last UnaryCall request's payload, as the server got it
	gate    chan struct{}          // holds the calls with holdKey until closed
}

// obey carries out the instructions in ctx's metadata.
func (s *echoServer) obey(ctx context.Context) {
	s.calls.Add(1)
	md, _ := metadata.FromIncomingContext(ctx)
	if len(md.Get(ProbeMetadata)) > 0 {
		s.probes.Add(1)
	}
	if v := md.Get(pushbackKey); len(v) > 0 {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(PushbackMetadata, v[0]))
	}
	if v := md.Get(sleepKey); len(v) > 0 {
		d, _ := time.ParseDuration(v[0])
		time.Sleep(d)
	}
	if len(md.Get(holdKey)) > 0 {
		select {
		case <-s.gate:
		case <-ctx.Done():
		}
	}
}

func (s *echoServer) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.obey(ctx)
	body := req.GetPayload().GetBody()
	s.payload.Store(&body)
	if st := req.GetResponseStatus(); st != nil {
		return nil, status.Error(codes.Code(st.GetCode()), st.GetMessage())
	}
	return &testgrpc.SimpleResponse{Payload: req.GetPayload(), Username: "echo"}, nil
}

func (s *echoServer) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	s.obey(ctx)
	return new(testgrpc.Empty), nil
}

func (s *echoServer) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testgrpc.StreamingOutputCallResponse]) error {
	for _, p := range req.GetResponseParameters() {
		select {
		case <-time.After(time.Duration(p.GetIntervalUs()) * time.Microsecond):
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: make([]byte, p.GetSize())}}); err != nil {
			return err
		}
	}
	if st := req.GetResponseStatus(); st != nil {
		return status.Error(codes.Code(st.GetCode()), st.GetMessage())
	}
	return nil
}

func (s *echoServer) FullDuplexCall(stream grpc.BidiStreamingServer[testgrpc.StreamingOutputCallRequest, testgrpc.StreamingOutputCallResponse]) error {
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: req.GetPayload()}); err != nil {
			return err
		}
	}
}

// serve starts a gRPC server with opts serving impl on a free loopback
// port, stopped with the test, and returns its address.
func serve(t testing.TB, impl testgrpc.TestServiceServer, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(srv, impl)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String()
}

// dial returns a connection to addr with opts, closed with the test.
func dial(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, conn.Close()) })
	return conn
}

// ready connects conn and waits until it is ready, so that a short timeout
// of the test's first call does not have to cover the connection too.
func ready(t testing.TB, conn *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn.Connect()
	for state := conn.GetState(); state != connectivity.Ready; state = conn.GetState() {
		require.True(t, conn.WaitForStateChange(ctx, state), "the connection is still %v", state)
	}
}

// guarded returns a TestService client on a connection to addr through a
// new Client with cfg in reg, and the Client.
func guarded(t testing.TB, reg *command.Registry, addr string, cfg ClientConfig, opts ...grpc.DialOption) (testgrpc.TestServiceClient, *Client, *grpc.ClientConn) {
	t.Helper()
	c, err := NewClient(reg, cfg)
	require.NoError(t, err)
	conn := dial(t, addr, append([]grpc.DialOption{grpc.WithChainUnaryInterceptor(c.Unary), grpc.WithChainStreamInterceptor(c.Stream)}, opts...)...)
	return testgrpc.NewTestServiceClient(conn), c, conn
}

// counts returns the cumulative counts of the command name in g.
func counts(t testing.TB, g *command.Group, name string) metrics.Counts {
	t.Helper()
	for _, c := range g.Snapshot().Commands {
		if c.Name == name {
			return c.Metrics.Cumulative
		}
	}
	t.Fatalf("group %s has no command %q", g.Name(), name)
	return metrics.Counts{}
}

// group returns the registry's group called name.
func group(t testing.TB, reg *command.Registry, name string) *command.Group {
	t.Helper()
	g, ok := reg.Group(name)
	require.True(t, ok, "no group %q", name)
	return g
}

// withMetadata returns ctx with the outgoing metadata kv added.
func withMetadata(ctx context.Context, kv ...string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// failWith returns a request whose answer is the status code with msg.
func failWith(code codes.Code, msg string) *testgrpc.SimpleRequest {
	return &testgrpc.SimpleRequest{ResponseStatus: &testgrpc.EchoStatus{Code: int32(code), Message: msg}}
}

// commandError returns the *command.Error behind err.
func commandError(t testing.TB, err error) *command.Error {
	t.Helper()
	var e *command.Error
	require.ErrorAs(t, err, &e)
	return e
}
