package grpcguard

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/bulwark-go/bulwark/command"
)

// BenchmarkUnary is a unary call on loopback, serial, with a 1 KiB payload
// each way: bare (the baseline of the same run), and through a Client in a
// Semaphore group and in a Thread group (which copies both messages).
//
//	go -C grpc test -run '^$' -bench Unary -benchmem -count 6 ./grpcguard/
func BenchmarkUnary(b *testing.B) {
	req := &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: make([]byte, 1024)}}
	for _, bc := range []struct {
		name  string
		guard bool
		cfg   command.GroupConfig
	}{
		{name: "bare"},
		{name: "semaphore", guard: true, cfg: command.GroupConfig{Strategy: command.Semaphore, Timeout: command.NoTimeout}},
		{name: "semaphore-timeout", guard: true, cfg: command.GroupConfig{Strategy: command.Semaphore}},
		{name: "thread", guard: true, cfg: command.GroupConfig{Timeout: command.NoTimeout}},
		{name: "thread-timeout", guard: true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			addr := serve(b, &echoServer{})
			var opts []grpc.DialOption
			if bc.guard {
				c, err := NewClient(newTestRegistry(b, nil), ClientConfig{Group: bc.cfg})
				if err != nil {
					b.Fatal(err)
				}
				opts = append(opts, grpc.WithUnaryInterceptor(c.Unary))
			}
			client := testgrpc.NewTestServiceClient(dial(b, addr, opts...))
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.UnaryCall(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
