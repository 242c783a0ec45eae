package rules

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	gometrics "github.com/rcrowley/go-metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/gmbridge"
	"github.com/bulwark-go/bulwark/internal/confdiff"
	"github.com/bulwark-go/bulwark/metrics"
)

// observe renders everything a rules document can change: every group of
// reg with its config generation, its config (every field a document can
// reach, by confdiff, and the limiters by identity), its breaker's and
// each command's breaker's config; and m's own record of what is in force
// (documents applied, baselines, the groups named, the limiters kept).
func observe(reg *command.Registry, m *Manager) string {
	var b strings.Builder
	config := func(indent string, old, new any) {
		for _, a := range confdiff.Diff(old, new) {
			fmt.Fprintf(&b, "%s%s\n", indent, a)
		}
	}
	limiters := func(cfg command.GroupConfig) {
		fmt.Fprintf(&b, "  rateLimit %p keyed %p\n", cfg.RateLimit, cfg.KeyedRateLimit)
		for _, name := range slices.Sorted(maps.Keys(cfg.Commands)) {
			fmt.Fprintf(&b, "  commands[%q].rateLimit %p\n", name, cfg.Commands[name].RateLimit)
		}
	}
	for _, gs := range reg.Snapshot().Groups {
		g, ok := reg.Group(gs.Name)
		if !ok {
			continue
		}
		cfg := g.Config()
		fmt.Fprintf(&b, "group %q generation %d\n", gs.Name, gs.ConfigGeneration)
		config("  ", command.GroupConfig{}, cfg)
		limiters(cfg)
		config("  breaker ", circuit.Config{}, g.Breaker().Config())
		for _, cs := range gs.Commands {
			cb, _ := g.CommandBreaker(cs.Name)
			config(fmt.Sprintf("  command %q ", cs.Name), circuit.Config{}, cb.Config())
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	fmt.Fprintf(&b, "applied %d named %v\n", m.applied, slices.Sorted(maps.Keys(m.named)))
	for _, name := range slices.Sorted(maps.Keys(m.baselines)) {
		fmt.Fprintf(&b, "baseline %q\n", name)
		config("  ", command.GroupConfig{}, m.baselines[name])
		limiters(m.baselines[name])
	}
	slots := slices.SortedFunc(maps.Keys(m.limits), func(a, b limitSlot) int {
		return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
	})
	for _, slot := range slots {
		fmt.Fprintf(&b, "limit %+v %+v %p\n", slot, m.limits[slot].spec, m.limits[slot].lim)
	}
	return b.String()
}

// TestEmptyGroupNameIsRefusedBeforeAnyChange: a group named "" used to
// pass the check and be refused by NewGroup while the document was being
// applied, after the groups sorted before it had changed (through the
// control endpoint: answered 422, and a group's MaxConcurrent was 9).
func TestEmptyGroupNameIsRefusedBeforeAnyChange(t *testing.T) {
	reg := newRegistry(t)
	m := newManager(t, reg)
	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"a": {"maxConcurrent": 3}}}`)))
	before := observe(reg, m)
	err := m.ApplyJSON([]byte(`{"groups": {"": {"maxConcurrent": 9}, "a": {"maxConcurrent": 9}, "new": {}}}`))
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, `rules: invalid: group "": a group name must not be empty`)
	assert.Equal(t, before, observe(reg, m))
	a, _ := reg.Group("a")
	assert.Equal(t, 3, a.Config().MaxConcurrent)
}

// TestGroupTheRegistryRefusesChangesNoGroup: a group the registry refuses
// to create for a reason no check can see in advance (here its metrics'
// names are taken in the go-metrics registry) used to be refused after the
// groups sorted before it had changed, and left a baseline for a group
// that did not exist. The groups are created before any other changes, and
// those created are closed again: no group changes.
func TestGroupTheRegistryRefusesChangesNoGroup(t *testing.T) {
	gm := gometrics.NewRegistry()
	reg := command.NewRegistry(command.RegistryConfig{Exporter: gmbridge.New(gm), Clock: new(metrics.ManualClock), Logger: quiet})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	m := newManager(t, reg)
	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"a": {"maxConcurrent": 3}}}`)))
	require.NoError(t, gm.Register("group.z.config.generation", gometrics.NewCounter()))
	before := observe(reg, m)

	err := m.ApplyJSON([]byte(`{"groups": {"a": {"maxConcurrent": 9}, "b": {"strategy": "semaphore"}, "z": {"timeout": "2s"}}}`))
	require.Error(t, err)
	assert.ErrorContains(t, err, `rules: group "z" not created, no group changed: `)
	assert.ErrorContains(t, err, "group.z.config.generation")
	assert.Equal(t, before, observe(reg, m))
	_, created := reg.Group("b")
	assert.False(t, created, "the group created before the refusal is closed again")
	assert.Nil(t, gm.Get("group.b.config.generation"), "with its metrics")

	gm.Unregister("group.z.config.generation")
	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"z": {"timeout": "2s"}}}`)))
	z, _ := reg.Group("z")
	assert.Equal(t, 2*time.Second, z.Config().Timeout)
	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {}}`)))
	assert.Equal(t, time.Second, z.Config().Timeout, "its baseline is the one recorded when it was created")
}

// fuzzBase is the document in force when FuzzRefusedDocumentChangesNothing
// applies its input: limiters, declared commands with a warm-up, a
// preset, a group of code's and one created by the rules.
const fuzzBase = `{"groups": {
	"a": {"strategy": "semaphore", "maxConcurrent": 3, "timeout": "200ms",
		"rateLimit": {"tokenBucket": {"rate": 5, "burst": 2}},
		"keyedRateLimit": {"maxKeys": 4, "slidingWindow": {"limit": 3}},
		"commands": {"q": {"timeout": "50ms", "breaker": {"warmUp": "1m", "minRequests": 5},
			"rateLimit": {"slidingWindow": {"limit": 2, "window": "2s", "buckets": 4}}}}},
	"coded": {"preset": "l1", "retry": {"maxAttempts": 3}, "commandBreaker": {"failureRatio": 0.3}}
}}`

// fuzzSeeds are documents refused for every reason the check knows, and a
// few it accepts, each next to groups it would change.
var fuzzSeeds = []string{
	fuzzBase,
	`{"groups": {}}`,
	`{"groups": {"": {"maxConcurrent": 9}, "a": {"maxConcurrent": 9}}}`,
	`{"groups": {"a": {"maxConcurrent": 9}, "b": {"breaker": {"failureRatio": 2}}}}`,
	`{"groups": {"a": {"maxConcurrent": 9}, "coded": {"strategy": "thread"}}}`,
	`{"groups": {"a": {"maxConcurrent": 9}, "z": {"preset": "l9"}}}`,
	`{"groups": {"a": {"commands": {"q": {"breaker": {"warmUp": "2m"}}}}, "coded": {"maxConcurrent": 7}}}`,
	`{"groups": {"coded": {"commandBreaker": {"warmUp": "30s"}}, "a": {"maxConcurrent": 9}}}`,
	`{"groups": {"a": {"rateLimit": {"tokenBucket": {"rate": 1e-12}}}, "z": {}}}`,
	`{"groups": {"a": {"keyedRateLimit": {"maxKeys": -1, "tokenBucket": {"rate": 1}}}, "z": {}}}`,
	`{"groups": {"a": {"commands": {"": {"timeout": "1s"}}}, "coded": {"timeout": "3s"}}}`,
	`{"groups": {"z": {"maxCommands": 1, "commands": {"x": {}, "y": {}}}, "a": {"maxConcurrent": 9}}}`,
	`{"groups": {"a": {"strategy": "semaphore", "queueSize": 4}, "z": {"strategy": "semaphore"}}}`,
	`{"groups": {"a": {"retry": {"maxAttempts": 3, "backoff": "50ms", "maxBackoff": "10ms"}}, "coded": {}}}`,
	`{"groups": {"a": {"timeout": "-1s"}, "z": {"breaker": {"window": {"length": "1s", "buckets": 3}}}}}`,
	`{"groups": {"a": {"maxConcurrent": 9}, "a": {"maxConcurrent": 4}}}`,
	`{"groups": {"coded": {"timeout": "0s"}, "z": {}}}`,
	`{"groups": {"a": {"maxConcurrent": 9}}} {}`,
	`{"groups": {"a": {"maxConcurent": 9}}}`,
	`{"groups": {"a": {"breaker": {"slowCallDuration": "1s"}}, "z": {}}}`,
	`{"groups": {"a": {"maxConcurrent": 9}, "coded": {"breaker": {"confidence": 1}}}}`,
	`{"groups": {"a": {"throttle": {"k": 2}}, "coded": {"throttle": {"k": 0.5}}}}`,
	`{"groups": {"a": {"priority": {"reserve": [0, 0.1, 0.25, 0.5]}}, "coded": {"priority": {"default": "P9"}}}}`,
}

// FuzzRefusedDocumentChangesNothing: whatever the document, if Apply
// refuses it, every group, every command's breaker, every limiter and the
// manager's record of what is in force are as they were.
func FuzzRefusedDocumentChangesNothing(f *testing.F) {
	for _, doc := range fuzzSeeds {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		reg := newRegistry(t)
		coded, err := reg.NewGroup("coded", command.GroupConfig{Strategy: command.Semaphore, MaxConcurrent: 5,
			Commands: map[string]command.CommandConfig{"d": {Timeout: time.Second}}})
		require.NoError(t, err)
		require.Equal(t, metrics.Success, event(t, coded, op{name: "traffic", run: succeed}))
		m := newManager(t, reg)
		require.NoError(t, m.ApplyJSON([]byte(fuzzBase)))
		before := observe(reg, m)
		err = m.ApplyJSON(doc)
		if err == nil {
			return
		}
		if after := observe(reg, m); before != after {
			t.Fatalf("document %q refused (%v), yet changed:\n%s", doc, err, diffLines(before, after))
		}
		require.ErrorIs(t, err, ErrInvalid, "found by the check, as the document's fault")
	})
}

// diffLines returns the lines of a and b that the other lacks.
func diffLines(a, b string) string {
	in := func(s string) map[string]bool {
		set := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			set[l] = true
		}
		return set
	}
	as, bs := in(a), in(b)
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if !bs[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !as[l] {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}
