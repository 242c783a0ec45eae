package grpcguard_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/grpc/grpcguard"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/ratelimit"
)

// echo is a TestService that echoes the request's payload.
type echo struct {
	testgrpc.UnimplementedTestServiceServer
}

func (echo) UnaryCall(_ context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{Payload: req.GetPayload()}, nil
}

// serve serves echo on a loopback port with opts; stop stops it.
func serve(opts ...grpc.ServerOption) (addr string, stop func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(srv, echo{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	return lis.Addr().String(), func() { srv.Stop(); <-done }
}

// A client whose calls run in a group per target: a pool of 10 workers, a
// 200 ms timeout and the breakers.
func ExampleNewClient() {
	addr, stop := serve()
	defer stop()

	reg := command.NewRegistry(command.RegistryConfig{})
	defer reg.Close(context.Background())
	c, err := grpcguard.NewClient(reg, grpcguard.ClientConfig{Group: command.GroupConfig{Timeout: 200 * time.Millisecond}})
	if err != nil {
		panic(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(c.Unary), grpc.WithStreamInterceptor(c.Stream))
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	resp, err := testgrpc.NewTestServiceClient(conn).UnaryCall(context.Background(),
		&testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("hello")}})
	if err != nil {
		panic(err)
	}
	g, _ := c.Group(conn, "/grpc.testing.TestService/UnaryCall")
	fmt.Println(string(resp.GetPayload().GetBody()))
	cmd := g.Snapshot().Commands[0]
	fmt.Println(g.Name() == conn.CanonicalTarget(), cmd.Name, cmd.Metrics.Cumulative[metrics.Success])
	// Output:
	// hello
	// true /grpc.testing.TestService/UnaryCall 1
}

// A server that allows each caller, by its x-tenant metadata, one call a
// second: the next is answered ResourceExhausted with a pushback.
func ExampleNewServer() {
	perTenant, err := ratelimit.NewPerKey(ratelimit.PerKeyConfig{MaxKeys: 10_000, New: func(string) (ratelimit.Limiter, error) {
		return ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 1, Burst: 1})
	}})
	if err != nil {
		panic(err)
	}
	reg := command.NewRegistry(command.RegistryConfig{})
	defer reg.Close(context.Background())
	s, err := grpcguard.NewServer(reg, grpcguard.ServerConfig{
		Group: command.GroupConfig{MaxConcurrent: 64, KeyedRateLimit: perTenant},
		Key:   grpcguard.KeyByMetadata("x-tenant"),
	})
	if err != nil {
		panic(err)
	}
	addr, stop := serve(grpc.UnaryInterceptor(s.Unary), grpc.StreamInterceptor(s.Stream))
	defer stop()

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	client := testgrpc.NewTestServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "acme")
	for range 2 {
		var trailer metadata.MD
		_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.Trailer(&trailer))
		fmt.Println(status.Code(err), len(trailer.Get(grpcguard.PushbackMetadata)) == 1)
	}
	// Output:
	// OK false
	// ResourceExhausted true
}
