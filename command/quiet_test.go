package command

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
)

// TestGroupQuiet: a group is quiet until a call; a call in flight, the
// events in its window, and a breaker out of the closed state each keep it
// from being quiet, until the window empties and the breaker closes.
func TestGroupQuiet(t *testing.T) {
	for _, strategy := range []Strategy{Thread, Semaphore} {
		t.Run(strategy.String(), func(t *testing.T) {
			g, clock := newTestGroup(t, GroupConfig{Strategy: strategy, Timeout: NoTimeout,
				CommandBreaker: circuit.Config{MinRequests: 1, OpenDuration: time.Minute}})
			require.True(t, g.quiet(), "never called")

			d := newGate()
			started := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				_, err := Execute(context.Background(), g, op[int]{"dep", func(ctx context.Context) (int, error) {
					close(started)
					return d.run(1)(ctx)
				}})
				done <- err
			}()
			receive(t, started, "start")
			clock.Advance(time.Minute) // the window holds nothing yet: only the call in flight
			require.False(t, g.quiet(), "a call in flight")
			close(d.open)
			require.NoError(t, receive(t, done, "the call's end"))
			require.False(t, g.quiet(), "a success in the window")
			clock.Advance(11 * time.Second)
			require.True(t, g.quiet(), "the window has emptied")

			_, err := Execute(context.Background(), g, op[int]{"dep", func(context.Context) (int, error) { return 0, errors.New("down") }})
			require.Error(t, err)
			clock.Advance(11 * time.Second)
			require.Equal(t, circuit.Open, mustCommandBreaker(t, g, "dep").State())
			require.False(t, g.quiet(), "the command's breaker is open, its window empty")
			mustCommandBreaker(t, g, "dep").Reset()
			require.True(t, g.quiet(), "closed again")
		})
	}
}

func mustCommandBreaker(t *testing.T, g *Group, name string) *circuit.Breaker {
	t.Helper()
	b, ok := g.CommandBreaker(name)
	require.True(t, ok, "command %q", name)
	return b
}
