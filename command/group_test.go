package command

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/metrics"
)

func TestGroupConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg  GroupConfig
		want string
	}{
		{GroupConfig{Strategy: 7}, "Strategy 7"},
		{GroupConfig{MaxConcurrent: -1}, "MaxConcurrent -1"},
		{GroupConfig{QueueSize: -2}, "QueueSize -2"},
		{GroupConfig{Strategy: Semaphore, QueueSize: 3}, "QueueSize 3 is set but Strategy is SEMAPHORE"},
		{GroupConfig{Timeout: -2 * time.Second}, "Timeout -2s"},
		{GroupConfig{FallbackLimit: -1}, "FallbackLimit -1"},
		{GroupConfig{Window: metrics.Window{Length: 10 * time.Second, Buckets: 3}}, "Window {Length: 10s, Buckets: 3}"},
		{GroupConfig{Breaker: circuit.Config{FailureRatio: 2}}, "Breaker: circuit: invalid config: FailureRatio 2"},
		{GroupConfig{CommandBreaker: circuit.Config{MinRequests: -1}}, "CommandBreaker: circuit: invalid config: MinRequests -1"},
		{GroupConfig{Commands: map[string]CommandConfig{"get": {Timeout: -3}}}, `Commands["get"].Timeout -3ns`},
		{GroupConfig{Commands: map[string]CommandConfig{"": {}}}, "a command name must not be empty"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			err := tc.cfg.Validate()
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.ErrorContains(t, err, tc.want)
			reg, _ := newTestRegistry(t)
			_, err = reg.NewGroup("g", tc.cfg)
			assert.ErrorIs(t, err, ErrInvalidConfig)
		})
	}
}

func TestGroupConfigDefaults(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{CommandBreaker: circuit.Config{SlowCallDuration: time.Second, SlowCallRatio: 0.5}})
	cfg := g.Config()
	assert.Equal(t, Thread, cfg.Strategy)
	assert.Equal(t, 10, cfg.MaxConcurrent)
	assert.Zero(t, cfg.QueueSize)
	assert.Equal(t, time.Second, cfg.Timeout)
	assert.Equal(t, 10, cfg.FallbackLimit)
	assert.Equal(t, metrics.DefaultWindow(), cfg.Window)
	bc := g.Breaker().Config()
	assert.Equal(t, 20, bc.MinRequests)
	assert.Equal(t, 0.5, bc.FailureRatio)
	assert.Equal(t, 5*time.Second, bc.OpenDuration)
	assert.Equal(t, metrics.DefaultWindow(), bc.Window)
	assert.Equal(t, "deps", bc.Name)
	assert.Same(t, g.clock, bc.Clock, "the breakers tell time by the registry's clock")
	stats := g.pool.Stats()
	assert.Equal(t, 10, stats.Capacity)
	assert.Zero(t, stats.QueueCapacity)
}

func TestNewGroupNames(t *testing.T) {
	reg, _ := newTestRegistry(t)
	_, err := reg.NewGroup("", GroupConfig{})
	assert.ErrorIs(t, err, ErrInvalidConfig)
	g, err := reg.NewGroup("a", GroupConfig{})
	require.NoError(t, err)
	_, err = reg.NewGroup("a", GroupConfig{})
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.ErrorContains(t, err, `group "a" already exists`)
	got, ok := reg.Group("a")
	assert.True(t, ok)
	assert.Same(t, g, got)
}

type plain struct{}

func (plain) Run(context.Context) (int, error) { return 1, nil }

type pointy struct{ n int }

func (p *pointy) Run(context.Context) (int, error) { return p.n, nil }

type generic[T any] struct{}

func (generic[T]) Run(context.Context) (T, error) {
	var zero T
	return zero, nil
}

type named struct{ n string }

func (n named) Name() string                      { return n.n }
func (named) Run(context.Context) (string, error) { return "", nil }

func TestCommandNames(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore})
	ctx := context.Background()
	name := func(info Info, err error) string {
		require.NoError(t, err)
		return info.Command
	}
	_, info, err := ExecuteInfo(ctx, g, plain{})
	assert.Equal(t, "plain", name(info, err))
	_, info, err = ExecuteInfo(ctx, g, &pointy{n: 2})
	assert.Equal(t, "pointy", name(info, err))
	_, info, err = ExecuteInfo(ctx, g, generic[string]{})
	assert.Equal(t, "generic[string]", name(info, err))
	_, info, err = ExecuteInfo(ctx, g, named{"lookup"})
	assert.Equal(t, "lookup", name(info, err))
	_, info, err = ExecuteInfo(ctx, g, named{"other"})
	assert.Equal(t, "other", name(info, err), "Name is asked on every call")
	_, info, err = ExecuteInfo(ctx, g, named{"lookup"}, WithName("forced"))
	assert.Equal(t, "forced", name(info, err))
	_, info, err = ExecuteInfo(ctx, g, plain{}, WithName(""))
	assert.Equal(t, "plain", name(info, err), "an empty WithName keeps the default")
	// Passed as interfaces: named by the dynamic type, or its Name.
	for _, tc := range []struct {
		r    Runner[int]
		want string
	}{{plain{}, "plain"}, {&pointy{n: 1}, "pointy"}, {plain{}, "plain"}} {
		_, info, err = ExecuteInfo(ctx, g, tc.r)
		assert.Equal(t, tc.want, name(info, err))
	}
	var r Runner[string] = named{"lookup"}
	_, info, err = ExecuteInfo(ctx, g, r)
	assert.Equal(t, "lookup", name(info, err))
	assert.Equal(t, []string{"forced", "generic[string]", "lookup", "other", "plain", "pointy"}, commandNames(g.Snapshot()))
}

func commandNames(s GroupSnapshot) []string {
	var names []string
	for _, c := range s.Commands {
		names = append(names, c.Name)
	}
	return names
}

// getProfile is a realistic command: a struct with a few fields, passed by
// value, named after its type.
type getProfile struct {
	id     int64
	region string
	fields []string
}

func (c getProfile) Run(context.Context) (int64, error) {
	return c.id + int64(len(c.region)+len(c.fields)), nil
}

// TestExecuteDoesNotAllocate: a semaphore call without a timeout, with the
// default (type) name or WithName, of an empty command, a command struct
// with fields or a pointer, allocates nothing once the command exists.
// Only a Namer struct with fields costs one allocation (Name is called
// through an interface).
func TestExecuteDoesNotAllocate(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, Timeout: NoTimeout})
	ctx := context.Background()
	id, region, fields := int64(7), "eu-west", []string{"name", "email"} // not constants: no static data
	ptr, namedPtr := &pointy{n: 3}, &named{region}                       // pointers that already live on the heap
	for _, tc := range []struct {
		name   string
		allocs float64
		call   func()
	}{
		{"empty", 0, func() { _, _ = Execute(ctx, g, plain{}) }},
		{"struct with fields", 0, func() { _, _ = Execute(ctx, g, getProfile{id: id, region: region, fields: fields}) }},
		{"pointer", 0, func() { _, _ = Execute(ctx, g, ptr) }},
		{"WithName", 0, func() { _, _ = Execute(ctx, g, getProfile{id: id, region: region}, WithName("x")) }},
		{"ExecuteInfo", 0, func() { _, _, _ = ExecuteInfo(ctx, g, getProfile{id: id, region: region, fields: fields}) }},
		{"Namer pointer", 0, func() { _, _ = Execute(ctx, g, namedPtr) }},
		{"interface", 0, func() { _, _ = Execute(ctx, g, Runner[int](ptr)) }},
		{"Namer struct with fields", 1, func() { _, _ = Execute(ctx, g, named{region}) }},
	} {
		tc.call()
		assert.Equal(t, tc.allocs, testing.AllocsPerRun(100, tc.call), tc.name)
	}
}

// TestExecutePoolDoesNotAllocate: a Thread call without a timeout recycles
// its per-call state, so a command struct with fields costs no allocation
// either (once the free lists are warm).
func TestExecutePoolDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race")
	}
	g, _ := newTestGroup(t, GroupConfig{Timeout: NoTimeout})
	ctx := context.Background()
	id, region := int64(7), "eu-west"
	call := func() {
		if _, err := Execute(ctx, g, getProfile{id: id, region: region}); err != nil {
			panic(err)
		}
	}
	call()
	assert.Zero(t, testing.AllocsPerRun(1000, call))
}

func TestCommandConfig(t *testing.T) {
	reg, _ := newTestRegistry(t)
	// Timeouts long enough that no call meets them, however loaded the
	// machine: the test reads the deadlines Run gets.
	g, err := reg.NewGroup("g", GroupConfig{Strategy: Semaphore, Timeout: time.Minute,
		Commands: map[string]CommandConfig{"fast": {Timeout: 10 * time.Second}, "free": {Timeout: NoTimeout}}})
	require.NoError(t, err)
	assert.Equal(t, []string{"fast", "free"}, commandNames(g.Snapshot()), "declared commands show before their first call")
	deadline := func(name string) (time.Duration, bool) {
		var left time.Duration
		var ok bool
		_, err := Execute(context.Background(), g, op[int]{name, func(ctx context.Context) (int, error) {
			var d time.Time
			d, ok = ctx.Deadline()
			left = time.Until(d)
			return 0, nil
		}})
		require.NoError(t, err)
		return left, ok
	}
	left, ok := deadline("fast")
	assert.True(t, ok)
	assert.LessOrEqual(t, left, 10*time.Second)
	_, ok = deadline("free")
	assert.False(t, ok)
	left, ok = deadline("other")
	assert.True(t, ok)
	assert.Greater(t, left, 10*time.Second)
	s := g.Snapshot()
	assert.Equal(t, NoTimeout, s.Commands[1].Timeout)
	assert.Equal(t, time.Minute, s.Commands[2].Timeout)
}

func TestRegistrySnapshot(t *testing.T) {
	reg, clock := newTestRegistry(t)
	b, err := reg.NewGroup("b", GroupConfig{Strategy: Semaphore, MaxConcurrent: 3, FallbackLimit: 4, Timeout: NoTimeout})
	require.NoError(t, err)
	a, err := reg.NewGroup("a", GroupConfig{MaxConcurrent: 2, QueueSize: 1, Timeout: 50 * time.Millisecond})
	require.NoError(t, err)
	ctx := context.Background()
	degrade := opFB[int]{op[int]{"y", fail[int](errBoom)}, func(context.Context, error) (int, error) { return 0, nil }}
	for range 3 {
		_, _ = Execute(ctx, b, degrade)
	}
	_, _ = Execute(ctx, b, op[int]{"y", succeed(1)})
	_, _ = Execute(ctx, b, op[int]{"x", func(context.Context) (int, error) { clock.Advance(time.Millisecond); return 1, nil }})
	_, _ = Execute(ctx, a, op[int]{"z", succeed(1)})

	s := reg.Snapshot()
	assert.WithinDuration(t, time.Now(), s.Time, time.Minute)
	require.Len(t, s.Groups, 2)
	assert.Equal(t, "a", s.Groups[0].Name, "sorted by name")
	sa, sb := s.Groups[0], s.Groups[1]
	assert.Equal(t, Thread, sa.Config.Strategy)
	assert.Equal(t, 2, sa.Bulkhead.Capacity)
	assert.Equal(t, 1, sa.Bulkhead.QueueCapacity)
	assert.Equal(t, 50*time.Millisecond, sa.Config.Timeout)
	assert.Equal(t, Semaphore, sb.Config.Strategy)
	assert.Equal(t, NoTimeout, sb.Config.Timeout)
	assert.Equal(t, 4, sb.Config.FallbackLimit)
	assert.Equal(t, 3, sb.Bulkhead.Capacity)
	assert.Equal(t, "b", sb.Breaker.Config.Name)
	assert.Equal(t, 20, sb.Breaker.Config.MinRequests)
	assert.Equal(t, 0.5, sb.Breaker.Config.FailureRatio)

	require.Equal(t, []string{"x", "y"}, commandNames(sb))
	x, y := sb.Commands[0], sb.Commands[1]
	assert.Equal(t, "b/y", y.Breaker.Config.Name)
	assert.Equal(t, int64(3), y.Metrics.Counts[metrics.Failure])
	assert.Equal(t, int64(3), y.Metrics.Counts[metrics.FallbackSuccess])
	assert.Equal(t, 0.75, y.Metrics.Counts.DegradedRate())
	assert.Equal(t, int64(4), y.Metrics.Total.Count)
	assert.InEpsilon(t, float64(time.Millisecond), float64(x.Metrics.Run.Percentiles[8]), 0.02, "run latency from the registry's clock")
	assert.Zero(t, x.InFlight)
	assert.Equal(t, int64(4), sb.Metrics.Counts[metrics.Success]+sb.Metrics.Counts[metrics.Failure]-1,
		"the group's counts are its commands' summed")
	assert.Equal(t, int64(3), sb.Metrics.Cumulative[metrics.Failure])
	assert.Equal(t, int64(1), sb.Metrics.Max, "peak running calls")
	assert.Zero(t, sb.Metrics.Total.Count, "latencies are per command")
}

func TestRegistryCloseWaits(t *testing.T) {
	reg, _ := newTestRegistry(t)
	g, err := reg.NewGroup("slow", GroupConfig{Timeout: NoTimeout})
	require.NoError(t, err)
	entered, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := Execute(context.Background(), g, op[int]{"get", func(context.Context) (int, error) {
			close(entered)
			<-release
			return 1, nil
		}})
		done <- err
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err = reg.Close(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "Close reports the call it had to leave running")
	close(release)
	assert.NoError(t, <-done)
	assert.NoError(t, g.Close(context.Background()), "a second Close is a no-op")
}

func TestEventSet(t *testing.T) {
	s := events(metrics.Timeout, metrics.FallbackSuccess, metrics.Success)
	assert.Equal(t, "SUCCESS|TIMEOUT|FALLBACK_SUCCESS", s.String())
	assert.Equal(t, 3, s.Len())
	assert.True(t, s.Has(metrics.Timeout))
	assert.False(t, s.Has(metrics.Failure))
	assert.Empty(t, metrics.EventSet(0).String())
}

func TestStrategyString(t *testing.T) {
	assert.Equal(t, "THREAD", Thread.String())
	assert.Equal(t, "SEMAPHORE", Semaphore.String())
	assert.Equal(t, "Strategy(9)", Strategy(9).String())
}

func TestBadRequestNil(t *testing.T) {
	assert.NoError(t, BadRequest(nil))
	assert.False(t, IsBadRequest(errBoom))
	assert.True(t, IsBadRequest(errors.Join(errBoom, BadRequest(errBoom))))
}
