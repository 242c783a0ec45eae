package confdiff

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type inner struct{ Ratio float64 }

type conf struct {
	Timeout time.Duration
	Inner   inner
	Ptr     *inner
	Map     map[string]inner
	Hook    func()
	Logger  *slog.Logger
	hidden  int
}

func TestDiffListsChangedFieldsOnly(t *testing.T) {
	old := conf{Timeout: time.Second, Inner: inner{0.5}, Map: map[string]inner{"a": {1}, "b": {2}}, hidden: 1}
	new := conf{Timeout: 2 * time.Second, Inner: inner{0.5}, Ptr: &inner{0.3}, Map: map[string]inner{"b": {3}},
		Hook: func() {}, Logger: slog.Default(), hidden: 2}
	got := map[string]string{}
	for _, a := range Diff(old, new) {
		got[a.Key] = a.Value.String()
	}
	require.Equal(t, map[string]string{
		"Timeout":      "1s -> 2s",
		"Ptr.Ratio":    "0 -> 0.3",
		"Map[a].Ratio": "1 -> 0",
		"Map[b].Ratio": "2 -> 3",
	}, got)
	require.Empty(t, Diff(old, old))
}

// A slice field (alert tiers) is compared whole; Value.Equal panics on it.
func TestDiffComparesSlicesWhole(t *testing.T) {
	type tiers struct{ Tiers []inner }
	old := tiers{Tiers: []inner{{1}, {2}}}
	require.Empty(t, Diff(old, tiers{Tiers: []inner{{1}, {2}}}))
	got := Diff(old, tiers{Tiers: []inner{{1}, {3}}})
	require.Len(t, got, 1)
	require.Equal(t, "Tiers", got[0].Key)
	require.Equal(t, "[{1} {2}] -> [{1} {3}]", got[0].Value.String())
}
