package command

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/metrics"
)

// TestNameIndexGrowsUnderReaders adds names past several doublings while
// readers look up the names already published: every published name is
// found, a name never added is not, and the orders hold every name once.
func TestNameIndexGrowsUnderReaders(t *testing.T) {
	const n = 3000
	x := newNameIndex()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				for _, c := range x.all() {
					if got := x.get(c.name); got != c {
						t.Errorf("get(%q) = %p, want %p", c.name, got, c)
						return
					}
				}
				if x.get("never added") != nil {
					t.Error("found a name never added")
					return
				}
			}
		}()
	}
	for i := range n {
		x.add(&commandState{name: fmt.Sprintf("cmd-%d", (i*7919)%n)})
	}
	close(done)
	wg.Wait()

	require.Equal(t, n, x.len())
	seen := map[string]bool{}
	for i, c := range x.byNameOrder() {
		assert.False(t, seen[c.name], "name %q twice", c.name)
		seen[c.name] = true
		if i > 0 {
			assert.Less(t, x.byNameOrder()[i-1].name, c.name)
		}
		assert.Same(t, c, x.get(c.name))
	}
	assert.Len(t, seen, n)
}

// TestManyNamesKeepTheirCommands creates more names than the first tables
// hold through Execute, then calls each again: every name keeps its own
// command and counts, and the snapshot lists each once, sorted.
func TestManyNamesKeepTheirCommands(t *testing.T) {
	g, _ := newTestGroup(t, GroupConfig{Strategy: Semaphore, MaxCommands: 500, Timeout: NoTimeout})
	ok := func(context.Context) (int, error) { return 1, nil }
	for round := range 2 {
		for i := range 300 {
			_, err := Execute(context.Background(), g, Func(fmt.Sprintf("n%03d", i), ok, nil))
			require.NoError(t, err, "round %d name %d", round, i)
		}
	}
	s := g.Snapshot()
	require.Len(t, s.Commands, 300)
	for i, c := range s.Commands {
		assert.Equal(t, fmt.Sprintf("n%03d", i), c.Name)
		assert.Equal(t, int64(2), c.Metrics.Cumulative[metrics.Success], "name %s", c.Name)
	}
}
