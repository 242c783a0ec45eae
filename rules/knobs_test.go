package rules

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
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
			`line 2, column 57: duration "1 sec"`},
		"reserve type": {"{\"groups\": {\"a\": {\n  \"deadlineReserve\": \"soon\"}}}",
			`line 2, column 22: duration "soon"`},
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
	reg, clock := manualRegistry(t)
	m := NewManager(reg, quiet, WithClock(clock))
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
		if name == "command warm-up" {
			// The command must run already for its warm-up to be fixed: declare it first.
			require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"a": {"maxConcurrent": 3}, "b": {"commands": {"q": {}}}}}`)))
			err = m.ApplyJSON([]byte(`{"groups": {"a": {"maxConcurrent": 9}, "b": ` + tc.group + `}}`))
		} else if name == "group warm-up" {
			require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"a": {"maxConcurrent": 3}, "b": {}}}`)))
			err = m.ApplyJSON([]byte(`{"groups": {"a": {"maxConcurrent": 9}, "b": ` + tc.group + `}}`))
		}
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
	m := NewManager(reg, quiet, WithClock(clock))
	doc := `{"groups": {"cold": {"strategy": "semaphore", "breaker": {"warmUp": "1m", "minRequests": 1}}}}`
	require.NoError(t, m.ApplyJSON([]byte(doc)))
	g, ok := reg.Group("cold")
	require.True(t, ok)
	fail := op{name: "q", run: func(context.Context) (int, error) { return 0, errors.New("cold cache") }}
	assert.Equal(t, metrics.Failure, event(t, g, fail))
	s := g.Breaker().Snapshot()
	assert.True(t, s.WarmingUp, "a group the rules create warms up")
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
