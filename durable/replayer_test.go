package durable_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/durable"
	"github.com/bulwark-go/bulwark/metrics"
)

// receiver is an idempotent test receiver: it applies each key once,
// counts every delivery, and fails while down.
type receiver struct {
	mu         sync.Mutex
	down       bool
	deliveries map[string]int
	applied    map[string]int
}

func newReceiver() *receiver {
	return &receiver{deliveries: map[string]int{}, applied: map[string]int{}}
}

func (r *receiver) apply(_ context.Context, e durable.Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliveries[e.Key]++
	if r.down {
		return errDown
	}
	if r.applied[e.Key] == 0 {
		r.applied[e.Key]++
	}
	return nil
}

func (r *receiver) setDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

func (r *receiver) count(m map[string]int, key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return m[key]
}

// enqueueN stores n entries keyed k0..k(n-1).
func enqueueN(t *testing.T, q durable.Queue, n int) {
	t.Helper()
	for i := range n {
		_, err := q.Enqueue(context.Background(), durable.Entry{Key: fmt.Sprint("k", i), Group: "orders", Command: "createOrder"})
		require.NoError(t, err)
	}
}

// newReplayer returns a replayer of cfg, logging to its group's log by
// default.
func newReplayer(t *testing.T, cfg durable.ReplayerConfig) *durable.Replayer {
	t.Helper()
	if cfg.Logger == nil && cfg.Group != nil {
		cfg.Logger = cfg.Group.Config().Logger
	}
	r, err := durable.NewReplayer(cfg)
	require.NoError(t, err)
	return r
}

func TestReplayerAppliesEveryEntryOnce(t *testing.T) {
	g, _ := newGroup(t)
	q := openStore(t)
	rcv := newReceiver()
	enqueueN(t, q, 5)
	r := newReplayer(t, durable.ReplayerConfig{Queue: q, Group: g, Apply: rcv.apply})
	n, err := r.Drain(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 5, n)
	for i := range 5 {
		key := fmt.Sprint("k", i)
		assert.Equal(t, 1, rcv.count(rcv.deliveries, key))
		applied, err := q.Applied(context.Background(), key)
		require.NoError(t, err)
		assert.True(t, applied)
	}
	st := r.Stats()
	assert.Equal(t, int64(5), st.Replayed)
	assert.Zero(t, st.Depth)
	assert.Equal(t, "orders", st.Group)
	cmds := g.Snapshot().Commands
	require.Len(t, cmds, 1)
	assert.Equal(t, "createOrder", cmds[0].Name, "replays run as the entry's command")
	assert.Equal(t, int64(5), cmds[0].Metrics.Counts[metrics.Success])
}

func TestReplayerWaitsWhileBreakerOpen(t *testing.T) {
	g, _ := newGroup(t)
	q := openStore(t)
	rcv := newReceiver()
	enqueueN(t, q, 3)
	r := newReplayer(t, durable.ReplayerConfig{Queue: q, Group: g, Apply: rcv.apply})
	g.Breaker().SetMode(circuit.ForcedOpen)
	n, err := r.Drain(context.Background())
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Zero(t, rcv.count(rcv.deliveries, "k0"))
	st := r.Stats()
	assert.Equal(t, 3, st.Depth, "the backlog shows while the breaker is open")
	assert.Positive(t, st.OldestAge)

	g.Breaker().SetMode(circuit.Normal)
	n, err = r.Drain(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 3, n)
}

// A replay the command's breaker refuses is not an attempt.
func TestReplayerRefusedReplayIsNoAttempt(t *testing.T) {
	g, _ := newGroup(t)
	q := openStore(t)
	rcv := newReceiver()
	_, err := command.Execute(context.Background(), g, durable.Write{Command: "createOrder", Key: "warm", Apply: rcv.apply, Queue: q})
	require.NoError(t, err)
	b, ok := g.CommandBreaker("createOrder")
	require.True(t, ok)
	b.SetMode(circuit.ForcedOpen)
	enqueueN(t, q, 1)
	r := newReplayer(t, durable.ReplayerConfig{Queue: q, Group: g, Apply: rcv.apply})
	n, err := r.Drain(context.Background())
	require.NoError(t, err)
	assert.Zero(t, n)
	es, err := q.Lease(context.Background(), time.Now(), 10)
	require.NoError(t, err)
	require.Len(t, es, 1)
	assert.Zero(t, es[0].Attempts)
}

func TestReplayerDeadLettersAfterMaxAttempts(t *testing.T) {
	g, logs := newGroup(t)
	q := openStore(t)
	rcv := newReceiver()
	rcv.setDown(true)
	enqueueN(t, q, 1)
	var dead []durable.Entry
	var mu sync.Mutex
	r := newReplayer(t, durable.ReplayerConfig{Queue: q, Group: g, Apply: rcv.apply,
		Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, Poll: time.Millisecond,
		OnDeadLetter: func(e durable.Entry) { mu.Lock(); dead = append(dead, e); mu.Unlock() }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	require.Eventually(t, func() bool { return r.Stats().DeadLettered == 1 }, 20*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	assert.Equal(t, durable.DefaultMaxAttempts, rcv.count(rcv.deliveries, "k0"), "dead-lettered after exactly MaxAttempts")
	mu.Lock()
	require.Len(t, dead, 1)
	assert.Equal(t, durable.DefaultMaxAttempts, dead[0].Attempts)
	assert.Contains(t, dead[0].LastError, errDown.Error())
	mu.Unlock()
	stored, err := q.DeadLetters(context.Background())
	require.NoError(t, err)
	require.Len(t, stored, 1)
	assert.Equal(t, "k0", stored[0].Key)
	assert.Contains(t, logs.String(), "deferred write dead-lettered")

	// The operator requeues it once the receiver is back.
	rcv.setDown(false)
	require.NoError(t, q.Requeue(context.Background(), stored[0].ID))
	n, err := r.Drain(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, 1, rcv.count(rcv.applied, "k0"))
}

func TestReplayerBadRequestIsDeadLetteredAtOnce(t *testing.T) {
	g, _ := newGroup(t)
	q := openStore(t)
	enqueueN(t, q, 1)
	calls := 0
	r := newReplayer(t, durable.ReplayerConfig{Queue: q, Group: g, Apply: func(context.Context, durable.Entry) error {
		calls++
		return command.BadRequest(fmt.Errorf("order refused"))
	}})
	_, err := r.Drain(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, calls)
	dead, err := q.DeadLetters(context.Background())
	require.NoError(t, err)
	require.Len(t, dead, 1)
	assert.Contains(t, dead[0].LastError, "order refused")
}

// An entry whose attempts were all begun (the last cut off by a crash) is
// dead-lettered without another replay.
func TestReplayerInterruptedAttemptsCount(t *testing.T) {
	g, _ := newGroup(t)
	q := openStore(t)
	rcv := newReceiver()
	enqueueN(t, q, 1)
	es, err := q.Lease(context.Background(), time.Now(), 1)
	require.NoError(t, err)
	es[0].Attempts = durable.DefaultMaxAttempts
	require.NoError(t, q.Update(context.Background(), es[0]))
	r := newReplayer(t, durable.ReplayerConfig{Queue: q, Group: g, Apply: rcv.apply})
	_, err = r.Drain(context.Background())
	require.NoError(t, err)
	assert.Zero(t, rcv.count(rcv.deliveries, "k0"))
	assert.Equal(t, int64(1), r.Stats().DeadLettered)
}

func TestReplayerConfigErrors(t *testing.T) {
	g, _ := newGroup(t)
	q := openStore(t)
	rcv := newReceiver()
	ok := durable.ReplayerConfig{Queue: q, Group: g, Apply: rcv.apply}
	for name, tc := range map[string]struct {
		edit func(*durable.ReplayerConfig)
		want string
	}{
		"no queue":    {func(c *durable.ReplayerConfig) { c.Queue = nil }, "Queue"},
		"no group":    {func(c *durable.ReplayerConfig) { c.Group = nil }, "Group"},
		"no apply":    {func(c *durable.ReplayerConfig) { c.Apply = nil }, "Apply"},
		"attempts":    {func(c *durable.ReplayerConfig) { c.MaxAttempts = -1 }, "MaxAttempts -1"},
		"backoff":     {func(c *durable.ReplayerConfig) { c.Backoff = -time.Second }, "Backoff -1s"},
		"max backoff": {func(c *durable.ReplayerConfig) { c.Backoff, c.MaxBackoff = time.Minute, time.Second }, "MaxBackoff 1s"},
		"poll":        {func(c *durable.ReplayerConfig) { c.Poll = -1 }, "Poll"},
		"batch":       {func(c *durable.ReplayerConfig) { c.Batch = -2 }, "Batch -2"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := ok
			tc.edit(&cfg)
			_, err := durable.NewReplayer(cfg)
			assert.ErrorIs(t, err, durable.ErrInvalidConfig)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}
