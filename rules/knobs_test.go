package rules

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/alert"
	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/ratelimit"
)

// op is a test command: run is its Run; idem makes it Idempotent.
type op struct {
	name string
	idem bool
	run  func(context.Context) (int, error)
}

func (o op) Name() string                         { return o.name }
func (o op) Idempotent() bool                     { return o.idem }
func (o op) Run(ctx context.Context) (int, error) { return o.run(ctx) }

func succeed(context.Context) (int, error) { return 1, nil }

// event runs cmd in g and returns its primary outcome.
func event(t *testing.T, g *command.Group, cmd op, opts ...command.Option) metrics.Event {
	t.Helper()
	_, info, _ := command.ExecuteInfo(context.Background(), g, cmd, opts...)
	return info.Event
}

func manualRegistry(t *testing.T) (*command.Registry, *metrics.ManualClock) {
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: quiet})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	return reg, clock
}

func TestParseErrorsInNewKnobsGiveLineAndField(t *testing.T) {
	for name, tc := range map[string]struct{ doc, want string }{
		"retry field": {"{\"groups\": {\"a\": {\n  \"retry\": {\"maxAttempt\": 3}}}}",
			`line 2, column 13: json: unknown field "maxAttempt"`},
		"bucket field": {"{\"groups\": {\"a\": {\n  \"rateLimit\": {\"tokenBucket\": {\"rate\": 1, \"brust\": 2}}}}}",
			`line 2, column 44: json: unknown field "brust"`},
		"limiter kind": {"{\"groups\": {\"a\": {\n  \"rateLimit\": {\"leakyBucket\": {}}}}}",
			`line 2, column 17: json: unknown field "leakyBucket"`},
		"window type": {"{\"groups\": {\"a\": {\"commands\": {\"c\": {\n  \"rateLimit\": {\"slidingWindow\": {\"limit\": 5, \"window\": \"1 sec\"}}}}}}}",
			`line 2, column 57: field groups.commands.rateLimit.slidingWindow.window: time: unknown unit " sec" in duration "1 sec"`},
		"reserve type": {"{\"groups\": {\"a\": {\n  \"deadlineReserve\": \"soon\"}}}",
			`line 2, column 22: field groups.deadlineReserve: time: invalid duration "soon"`},
		"maxKeys type": {"{\"groups\": {\"a\": {\n  \"keyedRateLimit\": {\"maxKeys\": \"many\"}}}}",
			"line 2, column 39: field groups.keyedRateLimit.maxKeys"},
	} {
		_, err := Parse([]byte(tc.doc))
		require.ErrorIs(t, err, ErrInvalid, name)
		assert.ErrorContains(t, err, tc.want, name)
	}
}

// TestNewKnobsRefuseBadValuesNamingTheField: a bad value in a new knob
// rejects the whole document with an error that names the group and the
// field, and changes nothing.
func TestNewKnobsRefuseBadValuesNamingTheField(t *testing.T) {
	reg, _ := manualRegistry(t)
	m := newManager(t, reg)
	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"a": {"maxConcurrent": 3}}}`)))
	for name, tc := range map[string]struct {
		group string
		want  string
		is    error
	}{
		"no limiter kind":   {`{"rateLimit": {}}`, `rateLimit: set exactly one of "tokenBucket" and "slidingWindow"`, nil},
		"two limiter kinds": {`{"rateLimit": {"tokenBucket": {"rate": 1}, "slidingWindow": {"limit": 1}}}`, `rateLimit: set exactly one`, nil},
		"bucket rate":       {`{"rateLimit": {"tokenBucket": {"burst": 5}}}`, `rateLimit: tokenBucket: ratelimit: invalid config: TokenBucketConfig.Rate 0 must be positive`, ratelimit.ErrInvalidConfig},
		"bucket burst":      {`{"rateLimit": {"tokenBucket": {"rate": 5, "burst": -1}}}`, `rateLimit: tokenBucket: ratelimit: invalid config: TokenBucketConfig.Burst -1`, ratelimit.ErrInvalidConfig},
		"window limit":      {`{"rateLimit": {"slidingWindow": {"window": "1s"}}}`, `rateLimit: slidingWindow: ratelimit: invalid config: SlidingWindowConfig.Limit 0 must be positive`, ratelimit.ErrInvalidConfig},
		"window buckets":    {`{"rateLimit": {"slidingWindow": {"limit": 5, "buckets": -2}}}`, `rateLimit: slidingWindow: ratelimit: invalid config: SlidingWindowConfig.Window {Length: 0s, Buckets: -2}`, ratelimit.ErrInvalidConfig},
		"keyed kind":        {`{"keyedRateLimit": {"maxKeys": 5}}`, `keyedRateLimit: set exactly one`, nil},
		"keyed bucket":      {`{"keyedRateLimit": {"tokenBucket": {"rate": -1}}}`, `keyedRateLimit: tokenBucket: ratelimit: invalid config: TokenBucketConfig.Rate -1`, ratelimit.ErrInvalidConfig},
		"keyed maxKeys":     {`{"keyedRateLimit": {"maxKeys": -1, "tokenBucket": {"rate": 1}}}`, `keyedRateLimit: maxKeys: ratelimit: invalid config: PerKeyConfig.MaxKeys -1`, ratelimit.ErrInvalidConfig},
		"command limiter":   {`{"commands": {"q": {"rateLimit": {"tokenBucket": {"rate": 0}}}}}`, `commands["q"].rateLimit: tokenBucket: ratelimit: invalid config: TokenBucketConfig.Rate 0`, ratelimit.ErrInvalidConfig},
		"retry attempts":    {`{"retry": {"maxAttempts": 11}}`, `Retry.MaxAttempts 11 must be between 0 and 10`, command.ErrInvalidConfig},
		"retry backoff":     {`{"retry": {"maxAttempts": 3, "backoff": "50ms", "maxBackoff": "10ms"}}`, `Retry.MaxBackoff 10ms must not be below Backoff 50ms`, command.ErrInvalidConfig},
		"retry budget":      {`{"retry": {"maxAttempts": 3, "budgetRatio": 2}}`, `Retry.BudgetRatio 2 must be in (0, 1]`, command.ErrInvalidConfig},
		"retry min per sec": {`{"retry": {"maxAttempts": 3, "budgetMinPerSecond": -1}}`, `Retry.BudgetMinPerSecond -1 must be a positive number`, command.ErrInvalidConfig},
		"retry after":       {`{"retry": {"maxAttempts": 3, "maxRetryAfter": "-1s"}}`, `Retry.MaxRetryAfter -1s must not be negative`, command.ErrInvalidConfig},
		"deadline reserve":  {`{"deadlineReserve": "-5ms"}`, `DeadlineReserve -5ms must not be negative`, command.ErrInvalidConfig},
	} {
		err := m.ApplyJSON([]byte(`{"groups": {"a": {"maxConcurrent": 9}, "b": ` + tc.group + `}}`))
		require.ErrorIs(t, err, ErrInvalid, name)
		assert.ErrorContains(t, err, `group "b": `, name)
		assert.ErrorContains(t, err, tc.want, name)
		if tc.is != nil {
			assert.ErrorIs(t, err, tc.is, name)
		}
		a, _ := reg.Group("a")
		assert.Equal(t, 3, a.Config().MaxConcurrent, name)
	}
}

// TestWarmUpByRules: warmUp takes effect in the breakers the rules create;
// for a breaker that runs already it cannot change, and a document that
// changes it is refused whole with an error naming the field.
func TestWarmUpByRules(t *testing.T) {
	reg, clock := manualRegistry(t)
	m := newManager(t, reg)
	doc := `{"groups": {"cold": {"strategy": "semaphore", "breaker": {"warmUp": "1m", "minRequests": 1}}}}`
	require.NoError(t, m.ApplyJSON([]byte(doc)))
	g, ok := reg.Group("cold")
	require.True(t, ok)
	fail := op{name: "q", run: func(context.Context) (int, error) { return 0, errors.New("cold cache") }}
	assert.Equal(t, metrics.Failure, event(t, g, fail))
	s := g.Breaker().Snapshot()
	assert.Positive(t, s.WarmUpLeft, "a group the rules create warms up")
	assert.Equal(t, circuit.Closed, s.State, "a failure during warm-up is not counted")
	require.NoError(t, m.ApplyJSON([]byte(doc)), "the same warm-up again is no change")

	err := m.ApplyJSON([]byte(`{"groups": {"cold": {"strategy": "semaphore", "breaker": {"warmUp": "2m", "minRequests": 1}}}}`))
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorIs(t, err, circuit.ErrInvalidConfig)
	assert.ErrorContains(t, err, `Breaker: circuit: invalid config: WarmUp 2m0s differs from 1m0s: it counts from the breaker's creation, use WarmUp(d)`)

	warm, err := reg.NewGroup("warm", command.GroupConfig{})
	require.NoError(t, err)
	require.Equal(t, metrics.Success, event(t, warm, op{name: "q", run: succeed}))
	err = m.ApplyJSON([]byte(`{"groups": {"cold": {"strategy": "semaphore", "breaker": {"warmUp": "1m", "minRequests": 1}},
		"warm": {"commandBreaker": {"warmUp": "30s"}}}}`))
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, `group "warm": `)
	assert.ErrorContains(t, err, `breaker of command "q": circuit: invalid config:`)
	assert.ErrorContains(t, err, `WarmUp 30s differs from 0s`)

	clock.Advance(time.Minute)
	assert.Equal(t, metrics.Failure, event(t, g, fail))
	assert.Equal(t, circuit.Open, g.Breaker().Snapshot().State, "after the warm-up, failures count")

	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {}}`)), "a group created with a warm-up can leave the document")
	assert.Equal(t, time.Minute, g.Breaker().Config().WarmUp)
}

// TestNewKnobsTakeEffect applies each new knob to real groups on a manual
// clock and shows its effect on calls.
func TestNewKnobsTakeEffect(t *testing.T) {
	reg, clock := manualRegistry(t)
	var slept []time.Duration
	_, err := reg.NewGroup("retrying", command.GroupConfig{Strategy: command.Semaphore,
		Retry: retry.Config{Sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }}})
	require.NoError(t, err)
	m := newManager(t, reg)
	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {
		"bucket":   {"strategy": "semaphore", "rateLimit": {"tokenBucket": {"rate": 1, "burst": 3}}},
		"window":   {"strategy": "semaphore", "commands": {"q": {"rateLimit": {"slidingWindow": {"limit": 2, "window": "10s", "buckets": 10}}}}},
		"keyed":    {"strategy": "semaphore", "keyedRateLimit": {"maxKeys": 2, "tokenBucket": {"rate": 1}}},
		"retrying": {"retry": {"maxAttempts": 3, "backoff": "10ms", "budgetMinPerSecond": 100}},
		"reserved": {"strategy": "semaphore", "deadlineReserve": "1h"}
	}}`)))
	group := func(name string) *command.Group {
		g, ok := reg.Group(name)
		require.True(t, ok, name)
		return g
	}

	bucket := group("bucket")
	for i := range 3 {
		require.Equal(t, metrics.Success, event(t, bucket, op{name: "q", run: succeed}), "burst call %d", i+1)
	}
	assert.Equal(t, metrics.RateLimited, event(t, bucket, op{name: "q", run: succeed}), "the (burst+1)th call")
	clock.Advance(time.Second)
	assert.Equal(t, metrics.Success, event(t, bucket, op{name: "q", run: succeed}), "a token a second, on the registry's clock")

	window := group("window")
	for range 2 {
		require.Equal(t, metrics.Success, event(t, window, op{name: "q", run: succeed}))
	}
	assert.Equal(t, metrics.RateLimited, event(t, window, op{name: "q", run: succeed}), "the command's limit")
	assert.Equal(t, metrics.Success, event(t, window, op{name: "r", run: succeed}), "another command is not limited")
	clock.Advance(10 * time.Second)
	assert.Equal(t, metrics.Success, event(t, window, op{name: "q", run: succeed}), "the window moved on")

	keyed := group("keyed")
	assert.Equal(t, metrics.Success, event(t, keyed, op{name: "q", run: succeed}, command.WithKey("alice")))
	assert.Equal(t, metrics.RateLimited, event(t, keyed, op{name: "q", run: succeed}, command.WithKey("alice")))
	assert.Equal(t, metrics.Success, event(t, keyed, op{name: "q", run: succeed}, command.WithKey("bob")), "each key its own quota")
	assert.Equal(t, metrics.Success, event(t, keyed, op{name: "q", run: succeed}, command.WithKey("carol")))
	perKey, ok := keyed.Config().KeyedRateLimit.(*ratelimit.PerKey)
	require.True(t, ok)
	assert.Equal(t, 2, perKey.Len(), "at most maxKeys keys are kept")
	assert.Equal(t, uint64(1), perKey.Evictions())
	assert.Equal(t, metrics.Success, event(t, keyed, op{name: "q", run: succeed}, command.WithKey("alice")), "alice was evicted: a full quota again")

	attempts := 0
	failing := op{name: "q", idem: true, run: func(context.Context) (int, error) { attempts++; return 0, errors.New("down") }}
	_, info, err := command.ExecuteInfo(context.Background(), group("retrying"), failing)
	require.Error(t, err)
	assert.Equal(t, 3, attempts, "maxAttempts attempts of an idempotent command")
	assert.Equal(t, 3, info.Attempts)
	assert.Len(t, slept, 2, "the code's Sleep stays under the rules' retry")

	ran := false
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, info, err = command.ExecuteInfo(ctx, group("reserved"), op{name: "q", run: func(context.Context) (int, error) { ran = true; return 1, nil }})
	require.Error(t, err)
	assert.Equal(t, metrics.QueueTimeout, info.Event, "less than the reserve left: Run never starts")
	assert.False(t, ran)
}

// TestUnchangedLimiterSpecKeepsTheLimiter: reapplying a document whose
// limiter spec did not change keeps the running limiter and its state; a
// changed spec, or one removed and added again, builds a new one; a
// rejected document changes none.
func TestUnchangedLimiterSpecKeepsTheLimiter(t *testing.T) {
	reg, _ := manualRegistry(t)
	m := newManager(t, reg)
	doc := func(maxConcurrent, burst int, extra string) []byte {
		return []byte(fmt.Sprintf(`{"groups": {"api": {"strategy": "semaphore", "maxConcurrent": %d,
			"rateLimit": {"tokenBucket": {"rate": 1, "burst": %d}},
			"keyedRateLimit": {"tokenBucket": {"rate": 1, "burst": 10}},
			"commands": {"q": {"rateLimit": {"slidingWindow": {"limit": 5}}}}}%s}}`, maxConcurrent, burst, extra))
	}
	require.NoError(t, m.ApplyJSON(doc(5, 2, "")))
	g, _ := reg.Group("api")
	first := g.Config()
	call := func() metrics.Event { return event(t, g, op{name: "q", run: succeed}) }
	require.Equal(t, metrics.Success, call())
	require.Equal(t, metrics.Success, call())
	require.Equal(t, metrics.RateLimited, call())

	require.NoError(t, m.ApplyJSON(doc(6, 2, `, "other": {"timeout": "2s"}`)), "an unrelated edit")
	now := g.Config()
	require.Equal(t, 6, now.MaxConcurrent)
	assert.Same(t, first.RateLimit, now.RateLimit, "the group's limiter is kept")
	assert.Same(t, first.KeyedRateLimit, now.KeyedRateLimit, "the keyed limiter is kept")
	assert.Same(t, first.Commands["q"].RateLimit, now.Commands["q"].RateLimit, "the command's limiter is kept")
	assert.Equal(t, metrics.RateLimited, call(), "and so is its state: the bucket is still empty")

	require.ErrorIs(t, m.ApplyJSON(doc(7, 3, `, "bad": {"timeout": "-1s"}`)), ErrInvalid)
	require.NoError(t, m.ApplyJSON(doc(6, 2, "")))
	assert.Same(t, first.RateLimit, g.Config().RateLimit, "a rejected document replaced no limiter")

	require.NoError(t, m.ApplyJSON(doc(6, 3, "")))
	changed := g.Config()
	assert.NotSame(t, first.RateLimit, changed.RateLimit, "a changed spec builds a new limiter")
	assert.Same(t, first.Commands["q"].RateLimit, changed.Commands["q"].RateLimit, "an unchanged one stays")
	for i := range 3 {
		require.Equal(t, metrics.Success, call(), "the new bucket starts full: call %d", i+1)
	}
	require.Equal(t, metrics.RateLimited, call())

	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"api": {"strategy": "semaphore"}}}`)))
	assert.Nil(t, g.Config().RateLimit, "dropped from the document: the baseline's (none)")
	require.NoError(t, m.ApplyJSON(doc(6, 3, "")))
	assert.NotSame(t, changed.RateLimit, g.Config().RateLimit, "removed and added again: a new limiter")
	assert.Equal(t, metrics.Success, call())
}

// TestPresetKeepsWhatCodeSet: a preset replaces the thresholds, not the
// alerts (which cannot change live), the probe classifier or the limiters
// that code set.
func TestPresetKeepsWhatCodeSet(t *testing.T) {
	reg, clock := manualRegistry(t)
	lim, err := ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 1, Clock: clock})
	require.NoError(t, err)
	alerts, err := alert.New(alert.Config{})
	require.NoError(t, err)
	_, err = reg.NewGroup("api", command.GroupConfig{Strategy: command.Semaphore, RateLimit: lim,
		Alerts:          alerts,
		ProbeClassifier: func(error) metrics.Event { return metrics.Success }})
	require.NoError(t, err)
	m := newManager(t, reg)
	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"api": {"preset": "l1"}}}`)))
	g, _ := reg.Group("api")
	c := g.Config()
	assert.Equal(t, 80*time.Millisecond, c.Timeout, "the preset's")
	assert.Same(t, alerts, c.Alerts)
	assert.NotNil(t, c.ProbeClassifier)
	assert.Same(t, lim, c.RateLimit)
}

// TestCommandWithWarmUpCanLeaveTheDocument: a command the rules declare
// with its own breaker warm-up keeps that warm-up (which cannot change)
// when the document drops its breaker, the command, or its whole group,
// and still follows the group's commandBreaker template otherwise.
func TestCommandWithWarmUpCanLeaveTheDocument(t *testing.T) {
	reg, _ := manualRegistry(t)
	_, err := reg.NewGroup("coded", command.GroupConfig{Strategy: command.Semaphore})
	require.NoError(t, err)
	m := newManager(t, reg)
	declare := `{"groups": {
		"created": {"strategy": "semaphore", "commands": {"q": {"breaker": {"warmUp": "1m", "minRequests": 7}}}},
		"coded": {"commands": {"q": {"breaker": {"warmUp": "2m"}}}}}}`
	require.NoError(t, m.ApplyJSON([]byte(declare)))
	breaker := func(group string) circuit.Config {
		g, ok := reg.Group(group)
		require.True(t, ok, group)
		b, ok := g.CommandBreaker("q")
		require.True(t, ok, group)
		return b.Config()
	}
	require.Equal(t, time.Minute, breaker("created").WarmUp)
	require.Equal(t, 2*time.Minute, breaker("coded").WarmUp)

	for _, tc := range []struct{ name, doc string }{
		{"breaker dropped", `{"groups": {"created": {"commands": {"q": {"breaker": {"minRequests": 9}}}},
			"coded": {"commands": {"q": {"timeout": "1s"}}}}}`},
		{"command dropped", `{"groups": {"created": {"commandBreaker": {"minRequests": 11}}, "coded": {}}}`},
		{"group dropped", `{"groups": {}}`},
	} {
		require.NoError(t, m.ApplyJSON([]byte(declare)), tc.name)
		require.NoError(t, m.ApplyJSON([]byte(tc.doc)), tc.name)
		assert.Equal(t, time.Minute, breaker("created").WarmUp, tc.name)
		assert.Equal(t, 2*time.Minute, breaker("coded").WarmUp, tc.name)
	}
	assert.Equal(t, 20, breaker("created").MinRequests, "back to the template's default")

	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"created": {"commandBreaker": {"minRequests": 11}}}}`)))
	assert.Equal(t, 11, breaker("created").MinRequests, "the command follows the template")
	assert.Equal(t, time.Minute, breaker("created").WarmUp)

	err = m.ApplyJSON([]byte(`{"groups": {"created": {"commands": {"q": {"breaker": {"warmUp": "3m"}}}}}}`))
	require.ErrorIs(t, err, circuit.ErrInvalidConfig, "a document that sets another warm-up is still refused")
	assert.ErrorContains(t, err, `breaker of command "q": circuit: invalid config: WarmUp 3m0s differs from 1m0s`)
	err = m.ApplyJSON([]byte(`{"groups": {"created": {"commandBreaker": {"warmUp": "3m"}}}}`))
	require.ErrorIs(t, err, circuit.ErrInvalidConfig, "so is a template that sets another")
}

// TestDocumentLimiterReplacesCodeLimiterUntilDropped: a limiter set in code
// stays while the document declares none, is replaced by one the document
// declares in its place, and comes back when the document drops it.
func TestDocumentLimiterReplacesCodeLimiterUntilDropped(t *testing.T) {
	reg, clock := manualRegistry(t)
	lim, err := ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: 1, Clock: clock})
	require.NoError(t, err)
	keyed, err := ratelimit.NewPerKey(ratelimit.PerKeyConfig{New: func(string) (ratelimit.Limiter, error) { return lim, nil }})
	require.NoError(t, err)
	_, err = reg.NewGroup("api", command.GroupConfig{Strategy: command.Semaphore, RateLimit: lim, KeyedRateLimit: keyed,
		Commands: map[string]command.CommandConfig{"q": {RateLimit: lim}}})
	require.NoError(t, err)
	g, _ := reg.Group("api")
	m := newManager(t, reg)

	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"api": {"maxConcurrent": 4, "commands": {"q": {"timeout": "1s"}}}}}`)))
	c := g.Config()
	assert.Same(t, lim, c.RateLimit, "the document declares none: the code's stays")
	assert.Same(t, keyed, c.KeyedRateLimit)
	assert.Same(t, lim, c.Commands["q"].RateLimit)

	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"api": {"rateLimit": {"tokenBucket": {"rate": 5}},
		"keyedRateLimit": {"tokenBucket": {"rate": 5}},
		"commands": {"q": {"rateLimit": {"slidingWindow": {"limit": 5}}}}}}}`)))
	c = g.Config()
	assert.NotSame(t, lim, c.RateLimit, "declared in its place: the document's")
	assert.NotSame(t, keyed, c.KeyedRateLimit)
	assert.NotSame(t, lim, c.Commands["q"].RateLimit)

	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"api": {}}}`)))
	c = g.Config()
	assert.Same(t, lim, c.RateLimit, "dropped from the document: the code's again")
	assert.Same(t, keyed, c.KeyedRateLimit)
	assert.Same(t, lim, c.Commands["q"].RateLimit)
}

// TestRulesSlidingWindowNeverOverAdmitsThroughExecute: 64 goroutines call
// Execute on a group whose rules declare a sliding window, on the
// registry's clock, which they move on. Execute reads the clock at each
// call's start and hands that instant to the window, so instants reach it
// out of order; still at most limit calls per window-length span from 0
// succeed. (Before the window counted an older instant as the newest it had
// seen, this admitted about 10 to 30% more.)
func TestRulesSlidingWindowNeverOverAdmitsThroughExecute(t *testing.T) {
	const (
		limit      = 10
		length     = 100 * time.Millisecond
		goroutines = 64
		calls      = 300 // per goroutine
	)
	reg, clock := manualRegistry(t)
	m := newManager(t, reg)
	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"api": {"strategy": "semaphore", "maxConcurrent": 1000,
		"rateLimit": {"slidingWindow": {"limit": 10, "window": "100ms", "buckets": 2}}}}}`)))
	g, _ := reg.Group("api")
	var wg sync.WaitGroup
	var succeeded atomic.Int64
	for range goroutines {
		wg.Go(func() {
			for i := range calls {
				switch e := event(t, g, op{name: "q", run: succeed}); e {
				case metrics.Success:
					succeeded.Add(1)
				case metrics.RateLimited:
				default:
					t.Errorf("event %v", e)
				}
				if i%4 == 0 {
					clock.Advance(length / 200)
				}
			}
		})
	}
	wg.Wait()
	windows := int64(clock.Now()/length) + 1
	require.Greater(t, windows, int64(10), "the run spans many windows")
	require.LessOrEqual(t, succeeded.Load(), limit*windows, "succeeded over %d windows of %v", windows, length)
	require.Greater(t, succeeded.Load(), limit*windows/2, "the window admits calls at all")
}
