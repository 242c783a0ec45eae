package grpcguard

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// stubbornKey makes the conservation test's inner client layer stubborn
// (see stubborn) for one call.
const stubbornKey = "x-test-stubborn"

// TestConservationThroughTheInterceptors drives a guarded client against a
// guarded server from many goroutines, in both strategies, under -race: a
// random mix of successes, failures, bad requests, calls slower than the
// timeout (some behind a stubborn layer, so that they go on detached in a
// Thread group), callers that give up, and more calls than either
// bulkhead holds. Each goroutine reuses one request and one reply for all
// its calls, writing them between calls, as a caller that moved on does.
// Then every call must have had exactly one outcome: what the callers saw
// equals the client command's counts, outcome by outcome, every success
// carries its own request's payload, and the server's groups counted
// exactly the calls that reached the server.
func TestConservationThroughTheInterceptors(t *testing.T) {
	for _, strategy := range strategies {
		t.Run(strategy.String(), func(t *testing.T) {
			conserve(t, strategy)
		})
	}
}

func conserve(t *testing.T, strategy command.Strategy) {
	const goroutines, calls = 8, 100
	reg := newTestRegistry(t, nil) // the manual clock never moves: the windows keep every outcome
	quiet := circuit.Config{MinRequests: 1 << 30}

	var reached atomic.Int64
	count := grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		reached.Add(1)
		return handler(ctx, req)
	})
	s, err := NewServer(reg, ServerConfig{Group: command.GroupConfig{MaxConcurrent: 5, Breaker: quiet, CommandBreaker: quiet}})
	require.NoError(t, err)
	addr := serve(t, &echoServer{}, count, grpc.ChainUnaryInterceptor(s.Unary))

	gc := command.GroupConfig{Strategy: strategy, MaxConcurrent: 6, Timeout: 40 * time.Millisecond, Breaker: quiet, CommandBreaker: quiet}
	if strategy == command.Thread {
		gc.QueueSize = 2
	}
	c, err := NewClient(reg, ClientConfig{Group: gc})
	require.NoError(t, err)
	inner := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if md, _ := metadata.FromOutgoingContext(ctx); len(md.Get(stubbornKey)) > 0 {
			time.Sleep(10 * time.Millisecond)
			ctx = context.WithoutCancel(ctx)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	conn := dial(t, addr, grpc.WithChainUnaryInterceptor(c.Unary, inner))
	client := testgrpc.NewTestServiceClient(conn)

	var seen [metrics.NumEvents]atomic.Int64
	var wg sync.WaitGroup
	for w := range goroutines {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			req := &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{}}
			for i := range calls {
				want := fmt.Sprintf("%d-%d", w, i)
				req.Payload.Body = []byte(want)
				req.ResponseStatus = nil
				ctx, cancel := context.WithCancel(context.Background())
				switch n := r.IntN(100); {
				case n < 45: // success
				case n < 60:
					req.ResponseStatus = &testgrpc.EchoStatus{Code: int32(codes.Unavailable)}
				case n < 70:
					req.ResponseStatus = &testgrpc.EchoStatus{Code: int32(codes.NotFound)}
				case n < 80:
					ctx = withMetadata(ctx, sleepKey, "70ms")
				case n < 90:
					ctx = withMetadata(ctx, sleepKey, "70ms", stubbornKey, "1")
				default: // the caller gives up first
					cancel()
					ctx, cancel = context.WithTimeout(withMetadata(context.Background(), sleepKey, "30ms"), 5*time.Millisecond)
				}
				reply, err := client.UnaryCall(ctx, req)
				cancel()
				var e *command.Error
				switch {
				case err == nil:
					seen[metrics.Success].Add(1)
					assert.Equal(t, want, string(reply.GetPayload().GetBody()), "a success carries its own request's payload")
				case errors.As(err, &e):
					seen[e.Event].Add(1)
				default:
					seen[metrics.BadRequest].Add(1)
				}
				req.Payload.Body = []byte("overwritten by the caller") // the caller moves on
			}
		})
	}
	wg.Wait()

	g := group(t, reg, conn.CanonicalTarget())
	require.Eventually(t, func() bool { return g.Snapshot().Commands[0].Detached == 0 }, 10*time.Second, time.Millisecond)
	n := counts(t, g, unaryMethod)
	var total int64
	for ev := range metrics.NumEvents {
		if got := seen[ev].Load(); got > 0 {
			total += got
			assert.Equal(t, got, n[ev], "%v: the callers saw %d", ev, got)
			t.Logf("%-20v %4d", ev, got)
		}
	}
	assert.Equal(t, int64(goroutines*calls), total, "every call returned once")
	assert.Equal(t, total, n.Calls(), "and has one outcome")
	for _, ev := range []metrics.Event{metrics.Success, metrics.Failure, metrics.Timeout, metrics.BadRequest, metrics.Cancelled} {
		assert.Positive(t, seen[ev].Load(), "the mix produced %v", ev)
	}

	// The server: the calls that reached it, one outcome each, though some
	// were still running when their clients left.
	sg, err := s.Group(unaryMethod)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return counts(t, sg, unaryMethod).Calls() == reached.Load()
	}, 10*time.Second, time.Millisecond, "server calls %d, reached %d", counts(t, sg, unaryMethod).Calls(), reached.Load())
}
