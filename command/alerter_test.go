package command

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
)

// recordingAlerter is an alerter that records what the group tells it.
type recordingAlerter struct {
	mu      sync.Mutex
	watched []*Group
	failed  []string // "command: error (request ID)"
	tier    string
}

func (a *recordingAlerter) Watch(g *Group, _ func() bool, _ *slog.Logger) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.watched = append(a.watched, g)
}

func (a *recordingAlerter) Unwatch(g *Group) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, w := range a.watched {
		if w == g {
			a.watched = append(a.watched[:i], a.watched[i+1:]...)
			return
		}
	}
}

// requestIDKey is the ctx key of TestAlerterHooks' request IDs.
type requestIDKey struct{}

func (a *recordingAlerter) CallFailed(ctx context.Context, _ *Group, command string, _ time.Duration, err error) {
	id, _ := ctx.Value(requestIDKey{}).(string)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failed = append(a.failed, command+": "+err.Error()+" ("+id+")")
}

func (a *recordingAlerter) Status(_ *Group, command string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tier, command == "dep"
}

// TestAlerterHooks: the group is watched from creation to Close; the
// errors of FAILURE and TIMEOUT reach CallFailed with the caller's ctx,
// those of a bad request, a rejection or a short-circuit do not; snapshots
// show Status.
func TestAlerterHooks(t *testing.T) {
	a := &recordingAlerter{tier: "P2"}
	reg, _ := newTestRegistry(t)
	g, err := reg.NewGroup("deps", GroupConfig{Strategy: Semaphore, Alerts: a,
		CommandBreaker: circuit.Config{MinRequests: 2, OpenDuration: time.Hour}})
	require.NoError(t, err)
	require.Equal(t, []*Group{g}, a.watched)

	_, _ = Execute(context.Background(), g, op[int]{name: "dep", run: fail[int](BadRequest(errors.New("bad input")))})
	ctx := context.WithValue(context.Background(), requestIDKey{}, "req-7")
	_, _ = Execute(ctx, g, op[int]{name: "dep", run: fail[int](errors.New("refused"))})
	_, _ = Execute(context.Background(), g, op[int]{name: "dep", run: func(context.Context) (int, error) {
		return 0, context.DeadlineExceeded
	}}, WithTimeout(time.Hour))
	_, err = Execute(context.Background(), g, op[int]{name: "dep", run: succeed(1)})
	require.ErrorIs(t, err, ErrRefused)
	require.Len(t, a.failed, 2, "%q", a.failed)
	require.Equal(t, "dep: refused (req-7)", a.failed[0])

	s := g.Snapshot()
	require.Equal(t, "P2", s.AlertTier)
	require.Equal(t, "P2", s.Commands[0].AlertTier)
	require.True(t, s.Commands[0].DegradedAlarm)

	require.NoError(t, g.Close(context.Background()))
	require.Empty(t, a.watched, "Close unwatches")
}
