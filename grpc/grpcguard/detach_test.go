package grpcguard

import (
	"context"
	"sync"
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
	"github.com/bulwark-go/bulwark/metrics"
)

// stubborn is an inner client interceptor that ignores its context: it
// waits before it sends (as a client-side pacer or a retry layer would)
// and keeps the call going after the deadline, as a layer that does not
// honour ctx does. Behind it a Thread group's timed-out call goes on,
// detached, long after its caller was answered: the worst case for the
// caller's memory. done is closed when the call it lets through ends.
func stubborn(wait time.Duration, done chan<- struct{}) grpc.UnaryClientInterceptor {
	var once sync.Once
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		defer once.Do(func() { close(done) })
		time.Sleep(wait)
		return invoker(context.WithoutCancel(ctx), method, req, reply, cc, opts...)
	}
}

// TestTimedOutCallNeverTouchesTheCallersMessages is the regression test of
// a hand-written interceptor whose detached Run kept writing the caller's
// reply after the timeout (go test -race: DATA RACE). In a Thread group
// the caller is answered at its 50 ms deadline and goes on to reuse its
// request, reply and header map at once; the call, behind a stubborn
// layer, marshals the request at 100 ms and gets the server's answer only
// once the test lets the server answer, after the caller's changes. Run
// under -race, any access of the call to the caller's
// memory after the answer is a reported race; and once the call is over,
// the caller's messages must be as the caller left them, and the server
// must have got the request as it was when the caller made the call.
//
// In a Semaphore group the call keeps its caller until it ends (the server
// answers after 300 ms), so the caller may only reuse its messages
// afterwards, and the server's answer, which came after the deadline, is a
// TIMEOUT.
func TestTimedOutCallNeverTouchesTheCallersMessages(t *testing.T) {
	for _, strategy := range strategies {
		t.Run(strategy.String(), func(t *testing.T) {
			reg := newTestRegistry(t, nil)
			srv := &echoServer{gate: make(chan struct{})}
			addr := serve(t, srv)
			c, err := NewClient(reg, ClientConfig{Group: command.GroupConfig{Strategy: strategy, Timeout: 50 * time.Millisecond}})
			require.NoError(t, err)
			done := make(chan struct{})
			conn := dial(t, addr, grpc.WithChainUnaryInterceptor(c.Unary, stubborn(100*time.Millisecond, done)))

			req := &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("as sent")}}
			reply := &testgrpc.SimpleResponse{Username: "before"}
			var header, trailer metadata.MD
			ctx := withMetadata(context.Background(), holdKey, "1", pushbackKey, "10")
			if strategy == command.Semaphore {
				close(srv.gate)
				ctx = withMetadata(ctx, sleepKey, "300ms")
			}
			start := time.Now()
			err = conn.Invoke(ctx, unaryMethod, req, reply, grpc.Header(&header), grpc.Trailer(&trailer))
			took := time.Since(start)
			assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
			assert.Equal(t, metrics.Timeout, commandError(t, err).Event)
			if strategy == command.Thread {
				select {
				case <-done:
					t.Fatal("a Thread caller must be answered at its deadline, while the call goes on")
				default:
				}
			}

			// The caller moves on at once: it reuses its messages. Then the
			// server may answer.
			req.Payload.Body = []byte("changed by the caller")
			reply.Username = "reused by the caller"
			header = metadata.Pairs("mine", "1")
			trailer = nil
			if strategy == command.Thread {
				close(srv.gate)
			}

			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the stubborn call never ended")
			}
			g := group(t, reg, conn.CanonicalTarget())
			require.Eventually(t, func() bool { return g.Snapshot().Commands[0].Detached == 0 }, 10*time.Second, time.Millisecond,
				"the detached call ends")

			assert.Equal(t, "reused by the caller", reply.GetUsername(), "no late write into the reply")
			assert.Equal(t, metadata.Pairs("mine", "1"), header, "no late write into the header")
			assert.Nil(t, trailer, "no late write into the trailer")
			got := srv.payload.Load()
			require.NotNil(t, got, "the server answered")
			if strategy == command.Thread {
				assert.Equal(t, "as sent", string(*got), "the server got the request as it was at the call")
				assert.Nil(t, reply.GetPayload(), "the answer went into the call's own reply")
			} else {
				assert.GreaterOrEqual(t, took, 300*time.Millisecond, "a Semaphore call keeps its caller")
				assert.Equal(t, "as sent", string(*got))
				// grpc unmarshalled the late answer into the caller's reply
				// before the call returned, as without the interceptor.
				assert.Equal(t, "as sent", string(reply.GetPayload().GetBody()))
			}
		})
	}
}
