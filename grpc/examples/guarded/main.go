// Command guarded is a gRPC client and server in one program, each
// protected by grpcguard. The server is an echo service (grpc's interop
// TestService) behind grpcguard.Server: a bulkhead per method and a quota
// per client (a token bucket per x-client metadata value), answering
// ResourceExhausted with grpc-retry-pushback-ms over the quota. In the
// middle third of the run it is sick: each call takes 300 ms and fails with
// Unavailable. The clients call it through grpcguard.Client (a pool with a
// 100 ms timeout and a breaker): the timeouts open the breaker, which
// short-circuits the calls in 0 ms and sends only a few probes to the sick
// server, then closes once it answers again. Client 0 is greedy (four
// times the others' rate): the server refuses it past its quota, and it
// waits out the pushback it is sent; the clients count that
// ResourceExhausted, a quota per client, as a bad request, so that the
// greedy client cannot open the breaker they all share. At the end it prints what the clients
// got, how many calls reached the server's handlers while it was sick, and
// the breaker's transitions.
//
//	go -C grpc run ./examples/guarded
//	go -C grpc run ./examples/guarded -duration 10s -clients 8 -quota 20
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/grpc/grpcguard"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/ratelimit"
)

func main() {
	p := defaultParams()
	flag.DurationVar(&p.Duration, "duration", p.Duration, "how long the clients call; the server is sick in its middle third")
	flag.IntVar(&p.Clients, "clients", p.Clients, "number of clients")
	flag.DurationVar(&p.Pace, "pace", p.Pace, "pause between two calls of a client (a quarter of it for the greedy client 0)")
	flag.Float64Var(&p.Quota, "quota", p.Quota, "calls per second the server allows each client")
	flag.Parse()
	if err := run(os.Stdout, p); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// params sets the demo's scale.
type params struct {
	Duration time.Duration
	Clients  int
	Pace     time.Duration
	Quota    float64
}

func defaultParams() params {
	return params{Duration: 6 * time.Second, Clients: 4, Pace: 20 * time.Millisecond, Quota: 60}
}

func (p params) validate() error {
	switch {
	case p.Duration <= 0:
		return fmt.Errorf("-duration %v must be positive", p.Duration)
	case p.Clients <= 0:
		return fmt.Errorf("-clients %d must be positive", p.Clients)
	case p.Pace < 0:
		return fmt.Errorf("-pace %v must not be negative", p.Pace)
	}
	return nil // -quota is checked by the token bucket
}

// echo is the server's service: it echoes, except while sick.
type echo struct {
	testgrpc.UnimplementedTestServiceServer
	sickFrom, sickTo time.Time
	calls, sickCalls atomic.Int64 // handler calls, and those while sick
}

func (e *echo) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	e.calls.Add(1)
	if now := time.Now(); now.After(e.sickFrom) && now.Before(e.sickTo) {
		e.sickCalls.Add(1)
		select {
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil, status.Error(codes.Unavailable, "sick")
	}
	return &testgrpc.SimpleResponse{Payload: req.GetPayload()}, nil
}

// tally is what the clients saw.
type tally struct {
	mu                                 sync.Mutex
	calls, sickCalls                   int // all, and those made while the server was sick
	ok, failed, timeouts, shorted, rej int
	limited                            int
	waited                             time.Duration
}

// client calls the server as client id until ctx ends, waiting out the
// pushback of a refusal.
func client(ctx context.Context, id int, c testgrpc.TestServiceClient, pace time.Duration, srv *echo, t *tally) {
	ctx = metadata.AppendToOutgoingContext(ctx, "x-client", "client-"+strconv.Itoa(id))
	for ctx.Err() == nil {
		start := time.Now()
		var trailer metadata.MD
		_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("ping")}}, grpc.Trailer(&trailer))
		if ctx.Err() != nil {
			return // the run is over: this call does not count
		}
		wait := pace
		var e *command.Error
		t.mu.Lock()
		t.calls++
		if start.After(srv.sickFrom) && start.Before(srv.sickTo) {
			t.sickCalls++
		}
		switch {
		case err == nil:
			t.ok++
		case status.Code(err) == codes.ResourceExhausted:
			t.limited++
			pushback := time.Second // without a pushback, a second
			if v := trailer.Get(grpcguard.PushbackMetadata); len(v) == 1 {
				if ms, perr := strconv.Atoi(v[0]); perr == nil && ms >= 0 {
					pushback = time.Duration(ms) * time.Millisecond
				}
			}
			wait = max(wait, pushback)
			t.waited += pushback
		case !errors.As(err, &e):
			t.failed++ // a bad request: none here
		case e.Event == metrics.Timeout:
			t.timeouts++
		case e.Event == metrics.ShortCircuited:
			t.shorted++
		case e.Event == metrics.ThreadPoolRejected:
			t.rej++
		default:
			t.failed++
		}
		t.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

func run(w io.Writer, p params) error {
	if err := p.validate(); err != nil {
		return err
	}
	quota := ratelimit.TokenBucketConfig{Rate: p.Quota, Burst: 5}
	if err := quota.Validate(); err != nil {
		return fmt.Errorf("-quota %v: %w", p.Quota, err)
	}
	perClient, err := ratelimit.NewPerKey(ratelimit.PerKeyConfig{MaxKeys: 1000, New: func(string) (ratelimit.Limiter, error) {
		return ratelimit.NewTokenBucket(quota)
	}})
	if err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	// The server, its own registry standing for its own process.
	serverReg := command.NewRegistry(command.RegistryConfig{Logger: quiet})
	defer serverReg.Close(context.Background())
	guard, err := grpcguard.NewServer(serverReg, grpcguard.ServerConfig{
		Group: command.GroupConfig{MaxConcurrent: 32, KeyedRateLimit: perClient},
		Key:   grpcguard.KeyByMetadata("x-client"),
	})
	if err != nil {
		return err
	}
	start := time.Now()
	srv := &echo{sickFrom: start.Add(p.Duration / 3), sickTo: start.Add(2 * p.Duration / 3)}
	gs := grpc.NewServer(grpc.UnaryInterceptor(guard.Unary))
	testgrpc.RegisterTestServiceServer(gs, srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	defer func() {
		gs.Stop()
		<-served
	}()

	// The clients, in a registry of theirs.
	clientReg := command.NewRegistry(command.RegistryConfig{Logger: quiet})
	defer clientReg.Close(context.Background())
	window := metrics.Window{Length: 500 * time.Millisecond, Buckets: 10}
	c, err := grpcguard.NewClient(clientReg, grpcguard.ClientConfig{
		Group: command.GroupConfig{
			MaxConcurrent: 16, Timeout: 100 * time.Millisecond, Window: window,
			Breaker: circuit.Config{Window: window, MinRequests: 5, FailureRatio: 0.5, OpenDuration: 500 * time.Millisecond, HalfOpenSuccesses: 2},
		},
		// The server's ResourceExhausted is a quota per client here: the
		// greedy client's doing, which must not open the breaker that all
		// the clients share.
		Classes: map[codes.Code]grpcguard.Class{codes.ResourceExhausted: grpcguard.BadRequest},
	})
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUnaryInterceptor(c.Unary))
	if err != nil {
		return err
	}
	defer conn.Close()
	stub := testgrpc.NewTestServiceClient(conn)

	ctx, cancel := context.WithTimeout(context.Background(), p.Duration)
	defer cancel()
	var t tally
	var wg sync.WaitGroup
	for id := range p.Clients {
		pace := p.Pace
		if id == 0 {
			pace /= 4 // greedy
		}
		wg.Go(func() { client(ctx, id, stub, pace, srv, &t) })
	}
	wg.Wait()

	g, err := c.Group(conn, "/grpc.testing.TestService/UnaryCall")
	if err != nil {
		return err
	}
	summary(w, p, &t, srv, g.Snapshot())
	return nil
}

// summary prints what the clients got, the load on the sick server and the
// breaker's story.
func summary(w io.Writer, p params, t *tally, srv *echo, g command.GroupSnapshot) {
	fmt.Fprintf(w, "%d clients (one greedy) for %v, quota %v/s each; the server is sick from %v to %v (300 ms, then Unavailable)\n",
		p.Clients, p.Duration, p.Quota, (p.Duration / 3).Round(time.Millisecond), (2 * p.Duration / 3).Round(time.Millisecond))
	fmt.Fprintf(w, "clients:  calls=%d ok=%d failed=%d timeouts=%d short_circuited=%d rejected=%d rate_limited=%d waited=%v (honouring the pushback)\n",
		t.calls, t.ok, t.failed, t.timeouts, t.shorted, t.rej, t.limited, t.waited.Round(time.Millisecond))
	fmt.Fprintf(w, "server:   handler_calls=%d; while sick: client_calls=%d handler_calls=%d\n", srv.calls.Load(), t.sickCalls, srv.sickCalls.Load())
	fmt.Fprintf(w, "breaker:  %s ends %v;", g.Name, g.Breaker.State)
	for _, tr := range g.Breaker.Transitions {
		fmt.Fprintf(w, " %v->%v (%s)", tr.From, tr.To, tr.Reason)
	}
	fmt.Fprintln(w)
}
