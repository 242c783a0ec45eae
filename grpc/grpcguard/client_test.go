package grpcguard

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/metrics"
)

var strategies = []command.Strategy{command.Thread, command.Semaphore}

func TestClientPassesTheServersAnswersThrough(t *testing.T) {
	for _, strategy := range strategies {
		t.Run(strategy.String(), func(t *testing.T) {
			reg := newTestRegistry(t, nil)
			addr := serve(t, &echoServer{})
			client, c, conn := guarded(t, reg, addr, ClientConfig{Group: command.GroupConfig{Strategy: strategy}})
			ctx := withMetadata(context.Background(), pushbackKey, "250")

			var header, trailer metadata.MD
			var p peer.Peer
			resp, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("hello")}},
				grpc.Header(&header), grpc.Trailer(&trailer), grpc.Peer(&p))
			require.NoError(t, err)
			assert.Equal(t, "hello", string(resp.GetPayload().GetBody()))
			assert.Equal(t, "echo", resp.GetUsername())
			assert.Equal(t, []string{"application/grpc"}, header.Get("content-type"))
			assert.Equal(t, []string{"250"}, trailer.Get(PushbackMetadata))
			require.NotNil(t, p.Addr)
			assert.Equal(t, addr, p.Addr.String())

			// A failure: the server's status as it sent it, and the
			// command's error behind it.
			trailer = nil
			_, err = client.UnaryCall(ctx, failWith(codes.Unavailable, "down for maintenance"), grpc.Trailer(&trailer))
			st := status.Convert(err)
			assert.Equal(t, codes.Unavailable, st.Code())
			assert.Equal(t, "down for maintenance", st.Message())
			e := commandError(t, err)
			assert.Equal(t, metrics.Failure, e.Event)
			assert.Equal(t, 250*time.Millisecond, e.RetryAfter())
			assert.Equal(t, []string{"250"}, trailer.Get(PushbackMetadata), "the trailer of a failure is the caller's too")

			// A bad request: exactly the server's error.
			_, err = client.UnaryCall(ctx, failWith(codes.NotFound, "no such thing"))
			assert.Equal(t, status.Error(codes.NotFound, "no such thing").Error(), err.Error())
			assert.Equal(t, codes.NotFound, status.Code(err))

			g := group(t, reg, c.GroupName(conn.CanonicalTarget(), unaryMethod))
			n := counts(t, g, unaryMethod)
			assert.Equal(t, int64(1), n[metrics.Success])
			assert.Equal(t, int64(1), n[metrics.Failure])
			assert.Equal(t, int64(1), n[metrics.BadRequest])
			assert.Equal(t, int64(3), n.Calls())
			b, _ := g.CommandBreaker(unaryMethod)
			assert.Equal(t, int64(2), b.Snapshot().Health.Requests, "the bad request is not counted by the breaker")
		})
	}
}

func TestClientClassifiesStatusCodes(t *testing.T) {
	reg := newTestRegistry(t, nil)
	addr := serve(t, &echoServer{})
	// Every code the default classes know, with two overrides.
	overrides := map[codes.Code]Class{codes.NotFound: Success, codes.Unavailable: BadRequest, codes.Code(42): BadRequest}
	client, c, conn := guarded(t, reg, addr, ClientConfig{
		GroupBy: ByMethod,
		Classes: overrides,
		Group:   command.GroupConfig{Strategy: command.Semaphore, CommandBreaker: circuit.Config{MinRequests: 1000}, Breaker: circuit.Config{MinRequests: 1000}},
	})
	want := map[metrics.Event]int64{}
	for code := codes.Code(1); code <= 17; code++ {
		class, ok := overrides[code]
		if !ok {
			class = DefaultClass(code)
		}
		event := map[Class]metrics.Event{Failure: metrics.Failure, BadRequest: metrics.BadRequest, Success: metrics.Success}[class]
		want[event]++
		_, err := client.UnaryCall(context.Background(), failWith(code, "m"))
		assert.Equal(t, code, status.Code(err), "code %v", code)
		assert.Equal(t, "m", status.Convert(err).Message(), "code %v", code)
		var e *command.Error
		if errors.As(err, &e) {
			assert.Equal(t, event, e.Event, "code %v", code)
		} else {
			assert.NotEqual(t, metrics.Failure, event, "code %v: a failure has a command error", code)
		}
	}
	_, err := client.UnaryCall(context.Background(), failWith(codes.Code(42), "custom"))
	assert.Equal(t, codes.Code(42), status.Code(err))
	want[metrics.BadRequest]++

	n := counts(t, group(t, reg, c.GroupName(conn.CanonicalTarget(), unaryMethod)), unaryMethod)
	for _, event := range []metrics.Event{metrics.Success, metrics.Failure, metrics.BadRequest} {
		assert.Equal(t, want[event], n[event], "%v", event)
	}
	assert.Equal(t, map[metrics.Event]int64{metrics.Failure: 6, metrics.BadRequest: 11, metrics.Success: 1}, want,
		"DefaultClass: Unavailable is overridden, 5 more failures (DeadlineExceeded, ResourceExhausted, Internal, Unknown, DataLoss) and code 17")
}

func TestDefaultClass(t *testing.T) {
	for code, want := range map[codes.Code]Class{
		codes.OK: Success, codes.Canceled: BadRequest, codes.Unknown: Failure, codes.InvalidArgument: BadRequest,
		codes.DeadlineExceeded: Failure, codes.NotFound: BadRequest, codes.AlreadyExists: BadRequest,
		codes.PermissionDenied: BadRequest, codes.ResourceExhausted: Failure, codes.FailedPrecondition: BadRequest,
		codes.Aborted: BadRequest, codes.OutOfRange: BadRequest, codes.Unimplemented: BadRequest, codes.Internal: Failure,
		codes.Unavailable: Failure, codes.DataLoss: Failure, codes.Unauthenticated: BadRequest, codes.Code(99): Failure,
	} {
		assert.Equal(t, want, DefaultClass(code), "%v", code)
	}
}

func TestClientShortCircuitsAnUnavailableServer(t *testing.T) {
	reg := newTestRegistry(t, nil)
	srv := &echoServer{}
	addr := serve(t, srv)
	client, _, _ := guarded(t, reg, addr, ClientConfig{Group: command.GroupConfig{CommandBreaker: circuit.Config{MinRequests: 4}}})
	for range 4 {
		_, err := client.UnaryCall(context.Background(), failWith(codes.Unavailable, "overloaded"))
		require.Equal(t, codes.Unavailable, status.Code(err))
	}
	before := srv.calls.Load()
	_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.ErrorIs(t, err, command.ErrRefused)
	assert.Equal(t, metrics.ShortCircuited, commandError(t, err).Event)
	assert.Positive(t, commandError(t, err).RetryAfter(), "the open breaker says when it lets a probe through")
	assert.Equal(t, before, srv.calls.Load(), "a short-circuited call never reaches the server")
}

func TestClientTagsProbes(t *testing.T) {
	clock := new(metrics.ManualClock)
	reg := newTestRegistry(t, clock)
	srv := &echoServer{}
	addr := serve(t, srv)
	client, _, _ := guarded(t, reg, addr, ClientConfig{Group: command.GroupConfig{
		CommandBreaker: circuit.Config{MinRequests: 2, OpenDuration: time.Second, HalfOpenSuccesses: 1},
	}})
	for range 2 {
		_, err := client.UnaryCall(context.Background(), failWith(codes.Internal, "bug"))
		require.Equal(t, codes.Internal, status.Code(err))
	}
	assert.Zero(t, srv.probes.Load(), "normal calls are not tagged")
	clock.Advance(time.Second)
	_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), srv.probes.Load(), "the half-open probe is tagged")
	_, err = client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), srv.probes.Load(), "the breaker closed: calls are normal again")
}

func TestClientHonoursPushbackInRetries(t *testing.T) {
	for _, tc := range []struct {
		pushback string
		attempts int
		waits    []time.Duration
	}{
		{pushback: "1500", attempts: 2, waits: []time.Duration{1500 * time.Millisecond}},
		{pushback: "-1", attempts: 1}, // "do not retry"
		{pushback: "soon", attempts: 1},
		{pushback: "3000", attempts: 1}, // beyond MaxRetryAfter: the server asks for more than the call is worth
	} {
		t.Run(tc.pushback, func(t *testing.T) {
			reg := newTestRegistry(t, nil)
			srv := &echoServer{}
			addr := serve(t, srv)
			var mu sync.Mutex
			var waits []time.Duration
			client, _, _ := guarded(t, reg, addr, ClientConfig{
				Idempotent: func(method string) bool { return method == unaryMethod },
				Group: command.GroupConfig{Retry: retry.Config{
					MaxAttempts: 2, MaxBackoff: 2 * time.Second, NoBudget: true,
					Sleep: func(_ context.Context, d time.Duration) error {
						mu.Lock()
						defer mu.Unlock()
						waits = append(waits, d)
						return nil
					},
				}},
			})
			_, err := client.UnaryCall(withMetadata(context.Background(), pushbackKey, tc.pushback), failWith(codes.Unavailable, "busy"))
			assert.Equal(t, codes.Unavailable, status.Code(err))
			assert.Equal(t, int64(tc.attempts), srv.calls.Load())
			assert.Equal(t, tc.waits, waits)
			e := commandError(t, err)
			switch tc.pushback {
			case "1500":
				assert.Equal(t, 1500*time.Millisecond, e.RetryAfter())
			case "3000":
				assert.Equal(t, 3*time.Second, e.RetryAfter())
			default:
				assert.Equal(t, time.Duration(math.MaxInt64), e.RetryAfter())
			}
		})
	}
}

func TestClientNeverRetriesMethodsNotIdempotent(t *testing.T) {
	reg := newTestRegistry(t, nil)
	srv := &echoServer{}
	addr := serve(t, srv)
	client, _, _ := guarded(t, reg, addr, ClientConfig{
		Idempotent: func(method string) bool { return method == emptyMethod },
		Group:      command.GroupConfig{Retry: retry.Config{MaxAttempts: 3, NoBudget: true}},
	})
	_, err := client.UnaryCall(context.Background(), failWith(codes.Unavailable, "busy"))
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Equal(t, int64(1), srv.calls.Load())
}

func TestClientRejectsBeyondItsBulkhead(t *testing.T) {
	for _, strategy := range strategies {
		t.Run(strategy.String(), func(t *testing.T) {
			reg := newTestRegistry(t, nil)
			srv := &echoServer{gate: make(chan struct{})}
			addr := serve(t, srv)
			client, _, _ := guarded(t, reg, addr, ClientConfig{Group: command.GroupConfig{Strategy: strategy, MaxConcurrent: 1, Timeout: 10 * time.Second}})
			held := make(chan error)
			go func() {
				_, err := client.UnaryCall(withMetadata(context.Background(), holdKey, "1"), &testgrpc.SimpleRequest{})
				held <- err
			}()
			require.Eventually(t, func() bool { return srv.calls.Load() == 1 }, 5*time.Second, time.Millisecond)
			_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
			assert.Equal(t, codes.Unavailable, status.Code(err))
			assert.ErrorIs(t, err, command.ErrRefused)
			close(srv.gate)
			require.NoError(t, <-held)
		})
	}
}

func TestClientTimeoutIsDeadlineExceeded(t *testing.T) {
	for _, strategy := range strategies {
		t.Run(strategy.String(), func(t *testing.T) {
			reg := newTestRegistry(t, nil)
			addr := serve(t, &echoServer{})
			client, _, _ := guarded(t, reg, addr, ClientConfig{Group: command.GroupConfig{Strategy: strategy, Timeout: 20 * time.Millisecond}})
			_, err := client.UnaryCall(withMetadata(context.Background(), sleepKey, "200ms"), &testgrpc.SimpleRequest{})
			assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
			assert.ErrorIs(t, err, command.ErrTimeout)
			assert.Equal(t, metrics.Timeout, commandError(t, err).Event)

			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err = client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
			assert.Equal(t, codes.Canceled, status.Code(err))
			assert.ErrorIs(t, err, context.Canceled)
		})
	}
}

func TestClientGroups(t *testing.T) {
	reg := newTestRegistry(t, nil)
	addr := serve(t, &echoServer{})
	mine, err := reg.NewGroup("passthrough:///"+addr, command.GroupConfig{Strategy: command.Semaphore})
	require.NoError(t, err)
	byTarget, c, conn := guarded(t, reg, addr, ClientConfig{}, grpc.WithResolvers())
	require.Equal(t, "dns:///"+addr, conn.CanonicalTarget())
	_, err = byTarget.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	require.NoError(t, err)
	_, err = byTarget.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.NoError(t, err)
	g := group(t, reg, "dns:///"+addr)
	assert.Equal(t, int64(1), counts(t, g, unaryMethod).Calls())
	assert.Equal(t, int64(1), counts(t, g, emptyMethod).Calls())
	assert.Equal(t, "dns:///"+addr, c.GroupName(conn.CanonicalTarget(), emptyMethod))

	// A group created beforehand is used as is.
	c2, err := NewClient(reg, ClientConfig{})
	require.NoError(t, err)
	passthrough := testgrpc.NewTestServiceClient(dial(t, "passthrough:///"+addr, grpc.WithUnaryInterceptor(c2.Unary)))
	_, err = passthrough.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), counts(t, mine, unaryMethod).Calls())

	byMethod, c3, conn3 := guarded(t, reg, addr, ClientConfig{GroupBy: ByMethod})
	_, err = byMethod.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.NoError(t, err)
	assert.Equal(t, "dns:///"+addr+emptyMethod, c3.GroupName(conn3.CanonicalTarget(), emptyMethod))
	assert.Equal(t, int64(1), counts(t, group(t, reg, "dns:///"+addr+emptyMethod), emptyMethod).Calls())
}

func TestClientBoundsItsGroups(t *testing.T) {
	reg := newTestRegistry(t, nil)
	addr := serve(t, &echoServer{})
	client, _, _ := guarded(t, reg, addr, ClientConfig{GroupBy: ByMethod, MaxGroups: 1})
	_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	require.NoError(t, err)
	_, err = client.EmptyCall(context.Background(), &testgrpc.Empty{})
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	assert.ErrorIs(t, err, ErrTooManyGroups)
	_, err = client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	assert.NoError(t, err, "the group it has keeps working")
}

func TestClientAfterTheRegistryClosed(t *testing.T) {
	reg := command.NewRegistry(command.RegistryConfig{Logger: discardLogger})
	addr := serve(t, &echoServer{})
	client, _, _ := guarded(t, reg, addr, ClientConfig{})
	require.NoError(t, reg.Close(context.Background()))
	_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.ErrorIs(t, err, command.ErrClosed)
}

func TestClientThreadGroupsNeedProtoMessages(t *testing.T) {
	reg := newTestRegistry(t, nil)
	addr := serve(t, &echoServer{})
	c, err := NewClient(reg, ClientConfig{})
	require.NoError(t, err)
	conn := dial(t, addr)
	invoked := false
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		invoked = true
		return nil
	}
	var reply string
	err = c.Unary(context.Background(), unaryMethod, &testgrpc.SimpleRequest{}, &reply, conn, invoker)
	assert.Equal(t, codes.Internal, status.Code(err))
	assert.ErrorContains(t, err, "its reply, a *string, is not a proto.Message")
	err = c.Unary(context.Background(), unaryMethod, "request", &testgrpc.SimpleResponse{}, conn, invoker)
	assert.ErrorContains(t, err, "its request, a string, is not a proto.Message")
	assert.False(t, invoked)
}

func TestClientConfigErrorsNameTheFieldAndValue(t *testing.T) {
	reg := newTestRegistry(t, nil)
	for _, tc := range []struct {
		cfg  ClientConfig
		want string
	}{
		{ClientConfig{GroupBy: 7}, "ClientConfig.GroupBy GroupBy(7)"},
		{ClientConfig{MaxGroups: -1}, "ClientConfig.MaxGroups -1"},
		{ClientConfig{Classes: map[codes.Code]Class{codes.OK: Failure}}, "ClientConfig.Classes[OK] is set to failure"},
		{ClientConfig{Classes: map[codes.Code]Class{codes.NotFound: 9}}, "ClientConfig.Classes[NotFound] Class(9) is not a known Class"},
		{ClientConfig{Group: command.GroupConfig{MaxConcurrent: -2}}, "ClientConfig.Group: command: invalid config: MaxConcurrent -2"},
	} {
		_, err := NewClient(reg, tc.cfg)
		assert.ErrorIs(t, err, command.ErrInvalidConfig)
		assert.ErrorContains(t, err, tc.want)
	}
	_, err := NewClient(nil, ClientConfig{})
	assert.ErrorIs(t, err, command.ErrInvalidConfig)
}

// lateContext has a deadline whose Done channel closes only some time after
// it: a context whose timer has not fired yet, as under load, where the
// goroutine that runs timers lags behind the clock.
type lateContext struct {
	context.Context
	deadline time.Time
	done     chan struct{}
}

func newLateContext(t *testing.T, deadline, lag time.Duration) *lateContext {
	ctx := &lateContext{Context: context.Background(), deadline: time.Now().Add(deadline), done: make(chan struct{})}
	timer := time.AfterFunc(deadline+lag, func() { close(ctx.done) })
	t.Cleanup(func() { timer.Stop() })
	return ctx
}

func (c *lateContext) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *lateContext) Done() <-chan struct{}       { return c.done }
func (c *lateContext) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// TestCallersDeadlineIsNeverTheServersFailure is the regression test of a
// call that the server ended at the caller's deadline (grpc sends the
// deadline along, and the server's timer cancels the call) a moment before
// the caller's own timer fired: Run returned DeadlineExceeded while its
// context was still live, and the call was recorded as a FAILURE of the
// server, counted by its breakers, instead of CANCELLED. Seen under load in
// TestClientTimeoutIsDeadlineExceeded (as a FAILURE instead of a TIMEOUT);
// the lagging context makes the moment last 150 ms.
func TestCallersDeadlineIsNeverTheServersFailure(t *testing.T) {
	for _, strategy := range strategies {
		t.Run(strategy.String(), func(t *testing.T) {
			reg := newTestRegistry(t, nil)
			addr := serve(t, &echoServer{})
			client, c, conn := guarded(t, reg, addr, ClientConfig{Group: command.GroupConfig{Strategy: strategy}})
			_, err := client.UnaryCall(withMetadata(newLateContext(t, 30*time.Millisecond, 150*time.Millisecond), sleepKey, "300ms"), &testgrpc.SimpleRequest{})
			assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
			assert.Equal(t, metrics.Cancelled, commandError(t, err).Event, "%v", err)
			g := group(t, reg, c.GroupName(conn.CanonicalTarget(), unaryMethod))
			b, _ := g.CommandBreaker(unaryMethod)
			assert.Zero(t, b.Snapshot().Health.Requests, "the breakers never see the caller's deadline")
		})
	}
}
