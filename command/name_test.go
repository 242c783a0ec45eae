package command

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/metrics"
)

// heapInUse returns the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// heapPerName returns the heap each of n new command names of length
// size costs in a fresh group.
func heapPerName(t *testing.T, n, size int) int64 {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore})
	before := heapInUse()
	for i := range n {
		_, err := Execute(context.Background(), g, op[int]{strings.Repeat("x", size) + strconv.Itoa(i), succeed(1)})
		require.NoError(t, err)
	}
	after := heapInUse()
	require.Len(t, g.Snapshot().Commands, n)
	return max(int64(after)-int64(before), 0) / int64(n)
}

// TestLongCommandNamesAreBounded: MaxCommands capped the names, not their
// length, and each byte of a name cost about 77 bytes of heap (copied into
// every go-metrics name of the command): 1.37 MB for a name of 16 KiB
// against 0.1 MB for a short one. A long name now costs what a name of
// MaxNameLength does, and long names that differ stay apart.
func TestLongCommandNamesAreBounded(t *testing.T) {
	short, long := heapPerName(t, 20, 8), heapPerName(t, 20, 16<<10)
	t.Logf("heap per command name: %d bytes (8 bytes long), %d (16 KiB long)", short, long)
	assert.Less(t, long, short+64<<10, "a 16 KiB name costs at most 64 KiB more than a short one")

	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore})
	base := strings.Repeat("é", 10_000) // two bytes a rune: the cut must fall between runes
	seen := map[string]bool{}
	for i := range 3 {
		name := base + strconv.Itoa(i)
		for range 2 {
			_, info, err := ExecuteInfo(context.Background(), g, op[int]{name, succeed(1)})
			require.NoError(t, err)
			assert.LessOrEqual(t, len(info.Command), MaxNameLength)
			assert.True(t, utf8.ValidString(info.Command), info.Command)
			assert.True(t, strings.HasPrefix(info.Command, "éé"), info.Command)
			seen[info.Command] = true
		}
		b, ok := g.CommandBreaker(name)
		require.True(t, ok, "CommandBreaker finds a command by the name its calls give")
		assert.Same(t, b, g.commands.Load().names.get(renamedOf(name)).breaker)
	}
	assert.Len(t, seen, 3, "names that differ only past the cut stay apart")
	s := g.Snapshot()
	assert.Equal(t, 3, s.RenamedCommands)
	for _, c := range s.Commands {
		assert.EqualValues(t, 2, c.Metrics.Cumulative[metrics.Success], "both calls of %s", c.Name)
	}
}

func renamedOf(name string) string {
	key, _ := renamed(name)
	return key
}

// TestInvalidUTF8CommandNamesAreMadeValid: a name that is not valid UTF-8
// reached the snapshots, the go-metrics names and the exporters as it was
// (one such name broke a whole Prometheus scrape, and JSON turned
// different names into the same one). It is renamed once, when first
// seen, to a valid name that keeps the two apart, and counted.
func TestInvalidUTF8CommandNamesAreMadeValid(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore})
	names := map[string]string{}
	for _, name := range []string{"caf\xe9", "caf\xe8", "café", "caf\xe9"} {
		_, info, err := ExecuteInfo(context.Background(), g, op[int]{name, succeed(1)})
		require.NoError(t, err)
		assert.True(t, utf8.ValidString(info.Command), "%q", info.Command)
		names[name] = info.Command
	}
	assert.Equal(t, "café", names["café"], "a valid name is kept as it is")
	assert.True(t, strings.HasPrefix(names["caf\xe9"], "caf\uFFFD~"), names["caf\xe9"])
	assert.NotEqual(t, names["caf\xe9"], names["caf\xe8"], "two invalid names stay apart")
	s := g.Snapshot()
	assert.Len(t, s.Commands, 3)
	assert.Equal(t, 2, s.RenamedCommands)
	assert.EqualValues(t, 2, counts(t, g, names["caf\xe9"])[metrics.Success], "a renamed name finds its command again")
}

// TestNameSpeltLikeARenamedOneIsNotMerged: a valid name that spells the
// renamed form of another name is a name of its own: renamed in turn, it
// gets its own command, and the first name keeps its.
func TestNameSpeltLikeARenamedOneIsNotMerged(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore})
	_, first, err := ExecuteInfo(context.Background(), g, op[int]{"a\xff", succeed(1)})
	require.NoError(t, err)
	require.NotEqual(t, "a\xff", first.Command)
	for range 2 {
		_, info, err := ExecuteInfo(context.Background(), g, op[int]{first.Command, succeed(1)})
		require.NoError(t, err)
		assert.NotEqual(t, first.Command, info.Command, "the name spelt like a renamed one is renamed too")
	}
	_, again, err := ExecuteInfo(context.Background(), g, op[int]{"a\xff", succeed(1)})
	require.NoError(t, err)
	assert.Equal(t, first.Command, again.Command)
	assert.EqualValues(t, 2, counts(t, g, first.Command)[metrics.Success])
	assert.Len(t, g.Snapshot().Commands, 2)
}

// TestRenamedNameKeepsItsCommandPastMaxCommands: once a group is full, new
// names run as the overflow command, but a renamed name it already has
// keeps its own.
func TestRenamedNameKeepsItsCommandPastMaxCommands(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, MaxCommands: 2})
	long := strings.Repeat("y", 1000)
	for _, name := range []string{long, "b", "c", long} {
		_, err := Execute(context.Background(), g, op[int]{name, succeed(1)})
		require.NoError(t, err)
	}
	assert.EqualValues(t, 2, counts(t, g, renamedOf(long))[metrics.Success])
	assert.EqualValues(t, 1, counts(t, g, overflowCommand)[metrics.Success])
}

// TestBadNamesRefusedInConfig: a group name, or a declared command name,
// that is not valid UTF-8 or longer than MaxNameLength is a configuration
// error naming it.
func TestBadNamesRefusedInConfig(t *testing.T) {
	reg, _ := newTestRegistry(t)
	long := strings.Repeat("z", MaxNameLength+1)
	for _, tc := range []struct {
		group string
		cfg   GroupConfig
		want  string
	}{
		{"bad\xff", GroupConfig{}, `group name "bad\xff" is not valid UTF-8`},
		{long, GroupConfig{}, "bytes long, over MaxNameLength (256)"},
		{"g", GroupConfig{Commands: map[string]CommandConfig{"x\xfe": {}}}, `Commands: a command name "x\xfe" is not valid UTF-8`},
		{"g", GroupConfig{Commands: map[string]CommandConfig{long: {}}}, "Commands: a command name"},
	} {
		_, err := reg.NewGroup(tc.group, tc.cfg)
		require.ErrorIs(t, err, ErrInvalidConfig, tc.want)
		assert.ErrorContains(t, err, tc.want)
	}
	_, err := reg.NewGroup(strings.Repeat("z", MaxNameLength), GroupConfig{})
	assert.NoError(t, err, "MaxNameLength bytes is fine")
}
