// Command dashboard is bulwark's main demo: a service with six simulated
// dependencies behind commands, under a modest load it drives itself, with
// the live dashboard at / and the hystrix.stream at /hystrix.stream.
//
//	go run ./examples/dashboard                  # until Ctrl-C, on 127.0.0.1:7979
//	go run ./examples/dashboard -duration 2m -addr 127.0.0.1:8080
//	go run ./examples/dashboard -h               # the flags
//	go run ./examples/dashboard -rules rules.json   # live settings from a watched file
//	go run ./examples/dashboard -commands 300       # a large service: 294 more commands
//	BULWARK_CONTROL_TOKEN=$(openssl rand -hex 16) go run ./examples/dashboard   # with controls
//
// Ctrl-C (SIGINT) or SIGTERM stops it cleanly: it stops the load, shuts
// the server and its streams down, closes the registry and exits 0. Under
// go run, Ctrl-C reaches the demo (it signals the terminal's whole process
// group) but go run then exits 1, and a signal sent to the go run process
// alone never reaches the demo (go run ignores SIGINT and dies of SIGTERM,
// leaving the demo running): to stop it with kill, build it first,
//
//	go build -o /tmp/bulwark-demo ./examples/dashboard && /tmp/bulwark-demo
//
// The dependencies, one group each:
//   - users/GetUser: healthy, 5-25 ms.
//   - payments/Charge: flaky, about 30 % errors, no fallback (a payment must
//     fail loudly, never "succeed" degraded).
//   - search/Query: slow, with latency spikes past its 300 ms timeout that
//     ignore cancellation, so timeouts, detached executions and the slow-call
//     ratio show.
//   - inventory/CheckStock: down 20 s of every minute (from second 35 to 55):
//     its breaker opens, probes with a growing (backed-off) open duration and
//     closes again; a static fallback answers meanwhile.
//   - reports/Generate: a pool of 2 workers and a queue of 2, fed more than it
//     can take, so it saturates and rejects.
//   - recommendations/ForUser: a semaphore group whose dependency has bursts
//     of errors (40 % from second 30 to 55 of every minute, below the
//     breaker's threshold), answered with the last good value, so the
//     degraded rate shows.
//
// -commands N (default 6: these six) adds N-6 generated commands in groups
// of up to twelve (see large.go), a large service: most healthy, some
// flaky, slow, rate limited or given bad requests, some with outages that
// come and go each at its own time, some declared and never called.
//
// It binds only to -addr, which is loopback by default. docs/dashboard.png
// is this demo after 3 minutes, and docs/dashboard-table.png the table
// view of -commands 300 after as long, made from the repository root by
//
//	BULWARK_DEMO_SCREENSHOT=docs/dashboard.png go -C browsertest test -run TestDemoScreenshot -timeout 10m .
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/fallback"
	"github.com/bulwark-go/bulwark/dashboard"
	"github.com/bulwark-go/bulwark/dashboard/control"
	"github.com/bulwark-go/bulwark/rules"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}

// run parses args, starts the service and its load, serves the dashboard,
// prints its URL to out, and returns when ctx ends or -duration elapses.
// -h prints the usage to out and returns nil: asking for help is not an
// error.
func run(ctx context.Context, args []string, out io.Writer) (err error) {
	fs := flag.NewFlagSet("dashboard", flag.ContinueOnError)
	fs.SetOutput(out)
	addr := fs.String("addr", "127.0.0.1:7979", "address to serve the dashboard on")
	duration := fs.Duration("duration", 0, "stop after this long (0: until interrupted)")
	load := fs.Float64("load", 1, "load multiplier (1: about 130 calls/s in all)")
	quiet := fs.Bool("quiet", false, "log warnings only")
	rulesFile := fs.String("rules", "", "JSON rules file (package rules) applied at start and whenever it changes")
	commands := fs.Int("commands", storyCommands, fmt.Sprintf("commands in all: the %d stories, then generated ones (a large service)", storyCommands))
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	if *duration < 0 {
		return fmt.Errorf("-duration %v is negative", *duration)
	}
	if *load <= 0 {
		return fmt.Errorf("-load %v must be positive", *load)
	}
	if *commands < storyCommands || *commands > maxCommands {
		return fmt.Errorf("-commands %d: must be between %d (the stories) and %d", *commands, storyCommands, maxCommands)
	}
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	level := slog.LevelInfo
	if *quiet {
		level = slog.LevelWarn
	}
	logger := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: level}))

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	defer ln.Close()

	reg := command.NewRegistry(command.RegistryConfig{Logger: logger})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = errors.Join(err, reg.Close(ctx))
	}()
	svc, err := newService(reg, time.Now())
	if err != nil {
		return err
	}
	if svc.generated, err = addGenerated(reg, *commands-storyCommands, svc.start); err != nil {
		return err
	}
	live, err := rules.NewManager(reg, logger)
	if err != nil {
		return err
	}
	if *rulesFile != "" {
		if err := live.LoadFile(*rulesFile); err != nil {
			return err
		}
	}
	cfg := dashboard.Config{Logger: logger}
	if token := os.Getenv("BULWARK_CONTROL_TOKEN"); token != "" {
		if cfg.Control, err = control.New(reg, control.Config{Token: token, Rules: live, Logger: logger}); err != nil {
			return err
		}
	}
	h, err := dashboard.New(reg, cfg)
	if err != nil {
		return err
	}

	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(out, "bulwark dashboard: http://%s/  (stream: http://%s%s)\n", ln.Addr(), ln.Addr(), dashboard.StreamPath)

	var wg sync.WaitGroup
	// Record the sparklines' history while no one watches, so the first
	// viewer sees the last two minutes at once.
	wg.Go(func() { _ = h.Stream().KeepHistory(ctx) })
	if *rulesFile != "" {
		wg.Go(func() {
			if err := live.Watch(ctx, *rulesFile, 0); err != nil {
				logger.Error("rules file watch stopped", slog.Any("error", err))
			}
		})
	}
	svc.drive(ctx, &wg, *load)
	<-ctx.Done()

	// Shutdown ends the dashboard's streams (which would otherwise never
	// go idle) and waits for the other requests, 5 s at most.
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	wg.Wait()
	return err
}

// service holds the groups and the simulated dependencies.
type service struct {
	start time.Time

	users, payments, search, inventory, reports, recs *command.Group

	lastRecs *fallback.LastGood[[]string] // last good recommendations, up to a minute old

	generated []generatedLoad // the commands -commands adds
}

func newService(reg *command.Registry, start time.Time) (*service, error) {
	s := &service{start: start}
	var err error
	if s.lastRecs, err = fallback.NewLastGood[[]string](time.Minute, nil); err != nil {
		return nil, err
	}
	// A breaker that trips after 20 calls in a 10 s window at 50 % errors,
	// stays open 5 s, doubles that after each failed probe (up to 20 s) and
	// closes after 3 good probes.
	breaker := circuit.Config{OpenDuration: 5 * time.Second, OpenBackoff: 2, OpenMaxDuration: 20 * time.Second}
	groups := []struct {
		g    **command.Group
		name string
		cfg  command.GroupConfig
	}{
		{&s.users, "users", command.GroupConfig{MaxConcurrent: 10, Timeout: 200 * time.Millisecond, CommandBreaker: breaker}},
		{&s.payments, "payments", command.GroupConfig{MaxConcurrent: 10, Timeout: 500 * time.Millisecond, CommandBreaker: breaker}},
		{&s.search, "search", command.GroupConfig{MaxConcurrent: 16, Timeout: 300 * time.Millisecond,
			CommandBreaker: circuit.Config{
				SlowCallDuration: 150 * time.Millisecond,
				SlowCallRatio:    0.6,
				OpenDuration:     5 * time.Second,
			}}},
		{&s.inventory, "inventory", command.GroupConfig{MaxConcurrent: 10, Timeout: 250 * time.Millisecond, CommandBreaker: breaker}},
		{&s.reports, "reports", command.GroupConfig{MaxConcurrent: 2, QueueSize: 2, Timeout: time.Second, CommandBreaker: breaker}},
		{&s.recs, "recommendations", command.GroupConfig{Strategy: command.Semaphore, MaxConcurrent: 8,
			Timeout: 150 * time.Millisecond, CommandBreaker: breaker}},
	}
	for _, g := range groups {
		if *g.g, err = reg.NewGroup(g.name, g.cfg); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// errUnavailable is what a dependency that is down answers.
var errUnavailable = errors.New("connection refused")

// sleep waits d or until ctx ends, like a call that honours its context.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// between returns a random duration in [lo, hi).
func between(lo, hi time.Duration) time.Duration {
	return lo + rand.N(hi-lo)
}

// getUser: a healthy dependency.
type getUser struct{}

func (getUser) Name() string { return "GetUser" }
func (getUser) Run(ctx context.Context) (string, error) {
	if err := sleep(ctx, between(5*time.Millisecond, 25*time.Millisecond)); err != nil {
		return "", err
	}
	if rand.Float64() < 0.005 {
		return "", errUnavailable
	}
	return "ada", nil
}

// charge: a flaky dependency, about 30 % errors. A payment must fail
// loudly, never "succeed" degraded: it has no fallback.
type charge struct{ command.NoFallback }

func (charge) Name() string { return "Charge" }
func (charge) Run(ctx context.Context) (string, error) {
	if err := sleep(ctx, between(20*time.Millisecond, 60*time.Millisecond)); err != nil {
		return "", err
	}
	if rand.Float64() < 0.3 {
		return "", errors.New("card processor: 502 bad gateway")
	}
	return "charged", nil
}

// query: a slow dependency. One call in eight hangs for 0.4-1.2 s in a call
// that ignores its context (a blocking driver call), so it outlives its
// timeout and stays detached in its worker.
type query struct{}

func (query) Name() string { return "Query" }
func (query) Run(ctx context.Context) ([]string, error) {
	if rand.Float64() < 0.125 {
		time.Sleep(between(400*time.Millisecond, 1200*time.Millisecond))
		return nil, ctx.Err()
	}
	d := between(40*time.Millisecond, 120*time.Millisecond)
	if rand.Float64() < 0.2 {
		d = between(150*time.Millisecond, 280*time.Millisecond) // slow, within the timeout
	}
	if err := sleep(ctx, d); err != nil {
		return nil, err
	}
	return []string{"result"}, nil
}

// checkStock: down from second 35 to second 55 of every minute; a static
// fallback (-1: "unknown") answers while it fails or its breaker is open.
type checkStock struct {
	fallback.Static[int]
	s *service
}

func (checkStock) Name() string { return "CheckStock" }
func (c checkStock) Run(ctx context.Context) (int, error) {
	if c.s.inventoryDown(time.Now()) {
		if err := sleep(ctx, between(1*time.Millisecond, 5*time.Millisecond)); err != nil {
			return 0, err
		}
		return 0, errUnavailable
	}
	if err := sleep(ctx, between(10*time.Millisecond, 30*time.Millisecond)); err != nil {
		return 0, err
	}
	return 42, nil
}

func (s *service) inventoryDown(now time.Time) bool {
	sec := now.Sub(s.start) % time.Minute
	return sec >= 35*time.Second && sec < 55*time.Second
}

// generate: a slow report, fed more than its 2 workers and 2 queue slots
// can take.
type generate struct{}

func (generate) Name() string { return "Generate" }
func (generate) Run(ctx context.Context) ([]byte, error) {
	if err := sleep(ctx, between(150*time.Millisecond, 350*time.Millisecond)); err != nil {
		return nil, err
	}
	return []byte("report"), nil
}

// forUser: recommendations with bursts of errors (40 % from second 30 to 55
// of every minute), answered with the last good value.
type forUser struct {
	*fallback.LastGood[[]string]
	s *service
}

func (forUser) Name() string { return "ForUser" }
func (f forUser) Run(ctx context.Context) ([]string, error) {
	if err := sleep(ctx, between(5*time.Millisecond, 40*time.Millisecond)); err != nil {
		return nil, err
	}
	sec := time.Since(f.s.start) % time.Minute
	burst := sec >= 30*time.Second && sec < 55*time.Second
	if burst && rand.Float64() < 0.4 {
		return nil, errors.New("recommender: overloaded")
	}
	recs := []string{"book", "lamp", "tea"}
	f.Store(recs)
	return recs, nil
}

// drive starts one load generator per command; each stops with ctx and is
// counted in wg.
func (s *service) drive(ctx context.Context, wg *sync.WaitGroup, load float64) {
	stock := checkStock{Static: fallback.Static[int]{Value: -1}, s: s}
	recs := forUser{LastGood: s.lastRecs, s: s}
	loads := []struct {
		rate float64 // calls per second
		call func(ctx context.Context)
	}{
		{40, func(ctx context.Context) { _, _ = command.Execute(ctx, s.users, getUser{}) }},
		{15, func(ctx context.Context) { _, _ = command.Execute(ctx, s.payments, charge{}) }},
		{20, func(ctx context.Context) { _, _ = command.Execute(ctx, s.search, query{}) }},
		{25, func(ctx context.Context) { _, _ = command.Execute(ctx, s.inventory, stock) }},
		{12, func(ctx context.Context) { _, _ = command.Execute(ctx, s.reports, generate{}) }},
		{20, func(ctx context.Context) { _, _ = command.Execute(ctx, s.recs, recs) }},
	}
	for _, l := range loads {
		wg.Go(func() { generateLoad(ctx, wg, l.rate*load, l.call) })
	}
	for _, l := range s.generated {
		call := func(ctx context.Context) { _, _ = command.Execute(ctx, l.group, l.call) }
		wg.Go(func() { generateLoad(ctx, wg, l.rate*load, call) })
	}
}

// generateLoad calls call about rate times a second, each call on its own
// goroutine (as concurrent requests would), at most 64 at once.
func generateLoad(ctx context.Context, wg *sync.WaitGroup, rate float64, call func(context.Context)) {
	inFlight := make(chan struct{}, 64)
	t := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		select {
		case inFlight <- struct{}{}:
		default:
			continue // the caller side is saturated: skip this tick
		}
		wg.Go(func() {
			defer func() { <-inFlight }()
			call(ctx)
		})
	}
}
