package rules

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newRegistry(t *testing.T) *command.Registry {
	reg := command.NewRegistry(command.RegistryConfig{Clock: new(metrics.ManualClock), Logger: quiet})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	return reg
}

// newManager returns a Manager for reg, logging nowhere.
func newManager(t *testing.T, reg *command.Registry) *Manager {
	m, err := NewManager(reg, quiet)
	require.NoError(t, err)
	return m
}

// TestNewManagerRefusesNilRegistry: NewManager(nil, nil) used to panic
// (it asked the nil registry for its logger).
func TestNewManagerRefusesNilRegistry(t *testing.T) {
	for _, logger := range []*slog.Logger{nil, quiet} {
		m, err := NewManager(nil, logger)
		require.EqualError(t, err, "rules: NewManager: the registry is nil")
		require.Nil(t, m)
	}
}

func TestParseErrorsGiveLineAndField(t *testing.T) {
	for name, tc := range map[string]struct{ doc, want string }{
		"unknown field": {"{\"groups\": {\n  \"a\": {\n    \"maxConcurent\": 3\n  }\n}}", `line 3, column 5: json: unknown field "maxConcurent"`},
		"syntax":        {"{\"groups\": {\n  \"a\": {,}\n}}", "line 2, column 9: invalid character ','"},
		"type":          {"{\"groups\": {\n  \"a\": {\"maxConcurrent\": \"ten\"}\n}}", "line 2, column 31: field groups.maxConcurrent"},
		"duration":      {"{\"groups\": {\n  \"a\": {\"timeout\": \"fast\"}\n}}", `line 2, column 20: field groups.timeout: time: invalid duration "fast"`},
		"no groups":     {`{}`, `no "groups" object`},
		"trailing":      {"{\"groups\": {}}\n{}", "line 2, column 1: data after the document"},
		"empty":         {"", "empty document"},
	} {
		_, err := Parse([]byte(tc.doc))
		require.ErrorIs(t, err, ErrInvalid, name)
		assert.ErrorContains(t, err, tc.want, name)
	}
}

func TestApplyPresetOverridesAndCommands(t *testing.T) {
	reg := newRegistry(t)
	classifier := func(error) bool { return true }
	_, err := reg.NewGroup("recs", command.GroupConfig{MaxConcurrent: 5, IsBadRequest: classifier,
		CommandBreaker: circuit.Config{Mode: circuit.ObserveOnly}})
	require.NoError(t, err)
	m := newManager(t, reg)
	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {
		"recs": {"preset": "l1", "maxConcurrent": 20, "throttle": {"k": 1.5}, "breaker": {"failureRatio": 0.3, "confidence": 0.95},
			"commands": {"similar": {"timeout": "50ms", "breaker": {"minRequests": 5}}}},
		"pay": {"preset": "never-degrade", "strategy": "semaphore", "timeout": "none"}
	}}`)))
	g, ok := reg.Group("recs")
	require.True(t, ok)
	c := g.Config()
	assert.Equal(t, 20, c.MaxConcurrent)
	assert.Equal(t, 80*time.Millisecond, c.Timeout, "from the preset")
	assert.Equal(t, 0.3, c.Breaker.FailureRatio, "overridden")
	assert.Equal(t, 0.95, c.Breaker.Confidence)
	assert.Equal(t, 1.5, c.Throttle.K)
	assert.Equal(t, 1.5, g.Snapshot().Throttle.K, "in force")
	assert.Equal(t, 0.95, g.Breaker().Config().Confidence, "in force")
	assert.Equal(t, 20, c.Breaker.MinRequests, "the preset's, where not overridden")
	assert.Equal(t, 0.5, c.CommandBreaker.FailureRatio)
	assert.Equal(t, circuit.ObserveOnly, c.CommandBreaker.Mode, "what code set stays")
	assert.NotNil(t, c.IsBadRequest, "the classifier stays")
	assert.Equal(t, 50*time.Millisecond, c.Commands["similar"].Timeout)
	assert.Equal(t, 5, c.Commands["similar"].Breaker.MinRequests)
	b, ok := g.CommandBreaker("similar")
	require.True(t, ok, "declared commands are created")
	assert.Equal(t, 5, b.Config().MinRequests)

	pay, ok := reg.Group("pay")
	require.True(t, ok, "a group the rules name is created")
	assert.Equal(t, command.Semaphore, pay.Config().Strategy)
	assert.True(t, pay.Config().NoFallback)
	assert.Equal(t, command.NoTimeout, pay.Config().Timeout)

	// Dropped from the document: back to the baseline.
	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {}}`)))
	assert.Equal(t, 5, g.Config().MaxConcurrent)
	assert.Equal(t, time.Second, g.Config().Timeout)
	assert.False(t, pay.Config().NoFallback)
	applied, lastErr := m.Status()
	assert.Equal(t, 2, applied)
	assert.NoError(t, lastErr)
}

// TestApplyIsAllOrNothing: one bad group keeps every group as it was.
func TestApplyIsAllOrNothing(t *testing.T) {
	reg := newRegistry(t)
	m := newManager(t, reg)
	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"a": {"maxConcurrent": 3}, "b": {"timeout": "1s"}}}`)))
	for _, doc := range []string{
		`{"groups": {"a": {"maxConcurrent": 9}, "b": {"breaker": {"failureRatio": 2}}}}`,
		`{"groups": {"a": {"maxConcurrent": 9}, "b": {"strategy": "semaphore"}}}`,
		`{"groups": {"a": {"maxConcurrent": 9}, "c": {"preset": "l9"}}}`,
	} {
		err := m.ApplyJSON([]byte(doc))
		require.ErrorIs(t, err, ErrInvalid, doc)
		require.ErrorIs(t, err, command.ErrInvalidConfig, doc)
		a, _ := reg.Group("a")
		assert.Equal(t, 3, a.Config().MaxConcurrent, doc)
		_, created := reg.Group("c")
		assert.False(t, created, doc)
		_, lastErr := m.Status()
		assert.Equal(t, err, lastErr)
	}
	applied, _ := m.Status()
	require.Equal(t, 1, applied)
}

// TestWatchAppliesChangesAndKeepsRulesOnBadFile: a valid change is applied
// within one second; an invalid one is rejected and the rules in force
// stay.
func TestWatchAppliesChangesAndKeepsRulesOnBadFile(t *testing.T) {
	reg := newRegistry(t)
	m := newManager(t, reg)
	path := filepath.Join(t.TempDir(), "rules.json")
	write := func(doc string) {
		tmp := path + ".tmp"
		require.NoError(t, os.WriteFile(tmp, []byte(doc), 0o600))
		require.NoError(t, os.Rename(tmp, path))
	}
	write(`{"groups": {"db": {"maxConcurrent": 4}}}`)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { assert.NoError(t, m.Watch(ctx, path, 50*time.Millisecond)) })
	require.Eventually(t, func() bool { _, ok := reg.Group("db"); return ok }, time.Second, 5*time.Millisecond)
	db, _ := reg.Group("db")
	require.Equal(t, 4, db.Config().MaxConcurrent)

	write(`{"groups": {"db": {"maxConcurrent": 7, "timeout": "300ms"}}}`)
	require.Eventually(t, func() bool { return db.Config().MaxConcurrent == 7 }, time.Second, 5*time.Millisecond,
		"a valid change applies within one second")
	assert.Equal(t, 300*time.Millisecond, db.Config().Timeout)

	write(`{"groups": {"db": {"maxConcurrent": 9, "timeout": "-5s"}}}`)
	require.Eventually(t, func() bool { _, err := m.Status(); return err != nil }, time.Second, 5*time.Millisecond)
	_, err := m.Status()
	assert.ErrorContains(t, err, "Timeout -5s must not be negative")
	assert.Equal(t, 7, db.Config().MaxConcurrent, "the rules in force stay")
	assert.Equal(t, uint64(1), db.Snapshot().ConfigGeneration)
}

func TestWatchRefusesBadFileAtStart(t *testing.T) {
	m := newManager(t, newRegistry(t))
	path := filepath.Join(t.TempDir(), "rules.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"groups": {"db": {"bogus": 1}}}`), 0o600))
	err := m.Watch(context.Background(), path, time.Millisecond)
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "line 1, column 20")
	require.True(t, errors.Is(m.Watch(context.Background(), filepath.Join(t.TempDir(), "none"), 0), os.ErrNotExist))
}

// TestErrorsNameTheGroupOnce: whether the rules or the group refuse a
// config, the error names the group once.
func TestErrorsNameTheGroupOnce(t *testing.T) {
	reg := newRegistry(t)
	m := newManager(t, reg)
	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"b": {"timeout": "1s"}}}`)))
	for name, tc := range map[string]struct{ doc, want string }{
		"refused by the group": {`{"groups": {"b": {"strategy": "semaphore"}}}`,
			`rules: invalid: group "b": command: invalid config: Strategy SEMAPHORE cannot change live`},
		"invalid for the group": {`{"groups": {"b": {"timeout": "-1s"}}}`,
			`rules: invalid: group "b": command: invalid config: Timeout -1s must not be negative`},
		"invalid for a new group": {`{"groups": {"c": {"timeout": "-1s"}}}`,
			`rules: invalid: group "c": command: invalid config: Timeout -1s must not be negative`},
		"refused by the rules": {`{"groups": {"c": {"strategy": "fibers"}}}`,
			`rules: invalid: group "c": strategy "fibers"`},
	} {
		err := m.ApplyJSON([]byte(tc.doc))
		require.ErrorIs(t, err, ErrInvalid, name)
		assert.ErrorContains(t, err, tc.want, name)
		assert.Equal(t, 1, strings.Count(err.Error(), `group "`), name)
	}
}

// TestDurationOfAnotherTypeGivesLineAndField: a duration written as a
// number (or any other non-string) is located like every other error, and
// the error says how durations are written.
func TestDurationOfAnotherTypeGivesLineAndField(t *testing.T) {
	for name, tc := range map[string]struct{ doc, want string }{
		"number": {"{\"groups\": {\"a\": {\"commands\": {\"c\": {\n  \"rateLimit\": {\"slidingWindow\": {\"limit\": 5, \"window\": 1}}}}}}}",
			`line 2, column 57: field groups.commands.rateLimit.slidingWindow.window: a duration is a string such as "250ms", not a number`},
		"negative": {"{\"groups\": {\"a\": {\"breaker\": {\"window\": {\n  \"length\":-2}}}}}",
			`line 2, column 12: field groups.breaker.window.length: a duration is a string such as "250ms", not a number`},
		"object": {"{\"groups\": {\"timeout\": {\"timeout\": \"1s\"}, \"a\": {\n  \"timeout\" : {}}}}",
			`line 2, column 15: field groups.timeout: a duration is a string such as "250ms", not an object`},
		"after a string": {"{\"groups\": {\"a\": {\"retry\": {\"backoff\": \"1s\"}},\n  \"b\": {\"retry\": {\"backoff\": 5}}}}",
			`line 2, column 30: field groups.retry.backoff: a duration is a string such as "250ms", not a number`},
		"promoted": {"{\"groups\": {\"a\": {\n  \"keyedRateLimit\": {\"slidingWindow\": {\"limit\": 1, \"window\": 2}}}}}",
			`line 2, column 62: field groups.keyedRateLimit.RateLimit.slidingWindow.window: a duration is a string such as "250ms", not a number`},
		"bool": {"{\"groups\": {\"a\": {\n\"retry\": {\"backoff\": true}}}}",
			`line 2, column 22: field groups.retry.backoff: a duration is a string such as "250ms", not a bool`},
	} {
		_, err := Parse([]byte(tc.doc))
		require.ErrorIs(t, err, ErrInvalid, name)
		assert.ErrorContains(t, err, tc.want, name)
	}
}

// TestNoneIsOnlyForTimeouts: "none" (no timeout) is accepted by the
// timeouts and refused, with line, column and field, by every other
// duration.
func TestNoneIsOnlyForTimeouts(t *testing.T) {
	doc, err := Parse([]byte(`{"groups": {"a": {"timeout": "none", "commands": {"c": {"timeout": "none"}}}}}`))
	require.NoError(t, err)
	assert.Equal(t, command.NoTimeout, time.Duration(*doc.Groups["a"].Timeout))
	assert.Equal(t, command.NoTimeout, time.Duration(*doc.Groups["a"].Commands["c"].Timeout))
	out, err := json.Marshal(doc)
	require.NoError(t, err)
	assert.Contains(t, string(out), `"timeout":"none"`, "written back as it was read")

	for name, tc := range map[string]struct{ doc, want string }{
		"deadlineReserve": {"{\"groups\": {\"a\": {\"timeout\": \"none\",\n  \"deadlineReserve\": \"none\"}}}",
			`line 2, column 22: field groups.deadlineReserve: "none" is only for a timeout: write a duration such as "250ms"`},
		"retry backoff": {"{\"groups\": {\"a\": {\n  \"retry\": {\"backoff\": \"none\"}}}}",
			`line 2, column 24: field groups.retry.backoff: "none" is only for a timeout`},
	} {
		_, err := Parse([]byte(tc.doc))
		require.ErrorIs(t, err, ErrInvalid, name)
		assert.ErrorContains(t, err, tc.want, name)
	}
}

// TestBadDurationStringIsLocatedAtItsValue: a duration string that does not
// parse is located at the value, not at an earlier occurrence of the same
// text (here a group's name), and the error names the field.
func TestBadDurationStringIsLocatedAtItsValue(t *testing.T) {
	_, err := Parse([]byte("{\"groups\": {\"fast\": {},\n  \"b\": {\"timeout\": \"fast\"}}}"))
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, `line 2, column 20: field groups.timeout: time: invalid duration "fast"`)
}

// TestUnknownFieldIsLocatedAtItsKey: an unknown field is located at its
// key, not at an earlier occurrence of the same text (here a group's name).
func TestUnknownFieldIsLocatedAtItsKey(t *testing.T) {
	_, err := Parse([]byte("{\"groups\": {\"brust\": {},\n  \"b\": {\"rateLimit\": {\"tokenBucket\": {\"rate\": 1, \"brust\": 2}}}}}"))
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, `line 2, column 50: json: unknown field "brust"`)
}

// A document written for the flat breaker format (halfOpenProbes and the
// like) is refused, located, with the field's new place.
func TestFlatBreakerFieldNamesItsNewPlace(t *testing.T) {
	_, err := Parse([]byte("{\"groups\": {\"a\": {\"breaker\": {\"minRequests\": 5,\n  \"halfOpenProbes\": 2}}}}"))
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, `line 2, column 3: json: unknown field "halfOpenProbes" (a breaker's open, halfOpen and ramp fields are objects now: write "halfOpen": {"probes": …})`)
}

// A group's or a command's slowCallDuration, of earlier documents, is
// refused, located, with its place now: the command breaker's.
func TestGroupSlowCallDurationNamesItsNewPlace(t *testing.T) {
	for _, doc := range []string{
		"{\"groups\": {\"a\": {\"timeout\": \"1s\",\n  \"slowCallDuration\": \"1s\"}}}",
		"{\"groups\": {\"a\": {\"commands\": {\"c\": {\"timeout\": \"1s\",\n  \"slowCallDuration\": \"1s\"}}}}}",
	} {
		_, err := Parse([]byte(doc))
		require.ErrorIs(t, err, ErrInvalid)
		assert.ErrorContains(t, err, `line 2, column 3: json: unknown field "slowCallDuration" (a group's or a command's slow-call threshold is its command breaker's now`)
	}
	_, err := Parse([]byte(`{"groups": {"a": {"commandBreaker": {"slowCallDuration": "1s", "slowCallRatio": 0.5}}}}`))
	assert.NoError(t, err, "a breaker's slowCallDuration stays")
}

// TestDuplicateKeyIsRefusedWithLineAndColumn: a key repeated in an object
// used to be accepted, the last one silently winning. It is refused at the
// repeated key, with where the first one is; struct fields repeat as the
// decoder matches them (case aside), map keys (group and command names)
// only when equal.
func TestDuplicateKeyIsRefusedWithLineAndColumn(t *testing.T) {
	for name, tc := range map[string]struct{ doc, want string }{
		"field": {"{\"groups\": {\"a\": {\"maxConcurrent\": 3,\n  \"maxConcurrent\": 9}}}",
			`line 2, column 3: duplicate key "maxConcurrent" (first at line 1, column 19): a repeated key would silently replace the first`},
		"field in another case": {"{\"groups\": {\"a\": {\"timeout\": \"1s\", \"Timeout\": \"2s\"}}}",
			`line 1, column 36: duplicate key "Timeout" (first at line 1, column 19)`},
		"group": {"{\"groups\": {\"a\": {},\n\"a\": {\"timeout\": \"1s\"}}}",
			`line 2, column 1: duplicate key "a" (first at line 1, column 13)`},
		"command": {"{\"groups\": {\"a\": {\"commands\": {\"q\": {}, \"r\": {}, \"q\": {}}}}}",
			`line 1, column 50: duplicate key "q" (first at line 1, column 32)`},
		"nested field": {"{\"groups\": {\"a\": {\"breaker\": {\"window\": {\"length\": \"1s\", \"length\": \"2s\"}}}}}",
			`line 1, column 58: duplicate key "length" (first at line 1, column 42)`},
		"promoted field": {"{\"groups\": {\"a\": {\"keyedRateLimit\": {\"tokenBucket\": {\"rate\": 1}, \"tokenBucket\": {\"rate\": 2}}}}}",
			`line 1, column 66: duplicate key "tokenBucket" (first at line 1, column 38)`},
		"groups": {"{\"groups\": {\"a\": {}}, \"groups\": {}}", `line 1, column 23: duplicate key "groups" (first at line 1, column 2)`},
	} {
		_, err := Parse([]byte(tc.doc))
		require.ErrorIs(t, err, ErrInvalid, name)
		assert.ErrorContains(t, err, tc.want, name)
	}
	doc, err := Parse([]byte(`{"groups": {"a": {"commands": {"q": {}, "Q": {}}}, "A": {}}}`))
	require.NoError(t, err, "names that differ in case are different groups and commands")
	assert.Len(t, doc.Groups, 2)
	assert.Len(t, doc.Groups["a"].Commands, 2)
}

// TestExplicitZeroThatMeansDefaultIsRefused: a zero written for a field
// whose zero means a default used to be taken silently ("timeout": "0s"
// made a group's 300 ms timeout the library's 1 s). It is refused at the
// value, naming the field; a zero that means off, or that is the value
// itself (queueSize 0), stays allowed.
func TestExplicitZeroThatMeansDefaultIsRefused(t *testing.T) {
	for _, tc := range []struct{ group, field string }{
		{`{"maxConcurrent": 0}`, "groups.maxConcurrent"},
		{`{"timeout": "0s"}`, "groups.timeout"},
		{`{"fallbackLimit": 0}`, "groups.fallbackLimit"},
		{`{"maxCommands": 0}`, "groups.maxCommands"},
		{`{"commands": {"q": {"timeout": "0"}}}`, "groups.commands.timeout"},
		{`{"retry": {"backoff": "0s"}}`, "groups.retry.backoff"},
		{`{"retry": {"maxBackoff": "0s"}}`, "groups.retry.maxBackoff"},
		{`{"retry": {"maxRetryAfter": "0s"}}`, "groups.retry.maxRetryAfter"},
		{`{"retry": {"budgetRatio": 0.0}}`, "groups.retry.budgetRatio"},
		{`{"retry": {"budgetMinPerSecond": -0}}`, "groups.retry.budgetMinPerSecond"},
		{`{"breaker": {"window": {"length": "0s"}}}`, "groups.breaker.window.length"},
		{`{"breaker": {"window": {"buckets": 0}}}`, "groups.breaker.window.buckets"},
		{`{"breaker": {"minRequests": 0}}`, "groups.breaker.minRequests"},
		{`{"breaker": {"failureRatio": 0e3}}`, "groups.breaker.failureRatio"},
		{`{"breaker": {"open": {"duration": "0s"}}}`, "groups.breaker.open.duration"},
		{`{"breaker": {"open": {"max": "0s"}}}`, "groups.breaker.open.max"},
		{`{"breaker": {"halfOpen": {"probes": 0}}}`, "groups.breaker.halfOpen.probes"},
		{`{"breaker": {"halfOpen": {"successes": 0}}}`, "groups.breaker.halfOpen.successes"},
		{`{"breaker": {"halfOpen": {"maxWait": "0s"}}}`, "groups.breaker.halfOpen.maxWait"},
		{`{"breaker": {"ramp": {"floor": 0}}}`, "groups.breaker.ramp.floor"},
		{`{"commandBreaker": {"minRequests": 0}}`, "groups.commandBreaker.minRequests"},
		{`{"commands": {"q": {"breaker": {"open": {"duration": "0s"}}}}}`, "groups.commands.breaker.open.duration"},
		{`{"rateLimit": {"tokenBucket": {"rate": 1, "burst": 0}}}`, "groups.rateLimit.tokenBucket.burst"},
		{`{"rateLimit": {"slidingWindow": {"limit": 1, "window": "0s"}}}`, "groups.rateLimit.slidingWindow.window"},
		{`{"commands": {"q": {"rateLimit": {"slidingWindow": {"limit": 1, "buckets": 0}}}}}`, "groups.commands.rateLimit.slidingWindow.buckets"},
		{`{"keyedRateLimit": {"maxKeys": 0, "tokenBucket": {"rate": 1}}}`, "groups.keyedRateLimit.maxKeys"},
		{`{"keyedRateLimit": {"tokenBucket": {"rate": 1, "burst": 0}}}`, "groups.keyedRateLimit.RateLimit.tokenBucket.burst"},
	} {
		doc := "{\"groups\": {\"a\": {},\n  \"b\": " + tc.group + "}}"
		_, err := Parse([]byte(doc))
		require.ErrorIs(t, err, ErrInvalid, tc.field)
		assert.ErrorContains(t, err, "line 2, column ", tc.field)
		assert.ErrorContains(t, err, "field "+tc.field+": ", tc.field)
		assert.ErrorContains(t, err, " would silently mean the default: omit the field for the default", tc.field)
	}
	_, err := Parse([]byte("{\"groups\": {\"a\": {\n  \"timeout\": \"0s\"}}}"))
	assert.EqualError(t, err, `rules: invalid: line 2, column 14: field groups.timeout: "0s" would silently mean the default: omit the field for the default, or write "none" for no timeout`)

	doc, err := Parse([]byte(`{"groups": {"a": {"queueSize": 0, "deadlineReserve": "0s", "noFallback": false,
		"retry": {"maxAttempts": 0},
		"breaker": {"slowCallDuration": "0s", "slowCallRatio": 0, "confidence": 0, "open": {"backoff": 0}, "ramp": {"duration": "0s"}, "warmUp": "0s"},
		"commands": {"q": {"timeout": "none"}}}}}`))
	require.NoError(t, err, "a zero that means off, or is the value itself")
	assert.Zero(t, *doc.Groups["a"].QueueSize)
}
