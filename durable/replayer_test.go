package durable_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
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
// counts every delivery, fails while down (errDown) and refuses the keys
// in refuse (errRefused).
type receiver struct {
	mu         sync.Mutex
	down       bool
	refuse     map[string]bool
	deliveries map[string]int
	applied    map[string]int
}

// errRefused is the receiver's refusal of a write.
var errRefused = errors.New("409 conflict")

// refusedIsRefused is a Classify that judges errRefused Refused.
func refusedIsRefused(err error) durable.Verdict {
	if errors.Is(err, errRefused) {
		return durable.Refused
	}
	return durable.Outage
}

func newReceiver() *receiver {
	return &receiver{refuse: map[string]bool{}, deliveries: map[string]int{}, applied: map[string]int{}}
}

func (r *receiver) apply(_ context.Context, e durable.Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliveries[e.Key]++
	if r.down {
		return errDown
	}
	if r.refuse[e.Key] {
		return errRefused
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

// newReplayer returns a replayer of cfg, logging nowhere unless cfg sets
// a Logger (as the tests that read the logs do).
func newReplayer(t *testing.T, cfg durable.ReplayerConfig) *durable.Replayer {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
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

// runReplayer runs r until t ends.
func runReplayer(t *testing.T, r *durable.Replayer) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})
}

// deadLetters returns q's dead letters.
func deadLetters(t *testing.T, q durable.Queue) []durable.Entry {
	t.Helper()
	dead, err := q.DeadLetters(context.Background())
	require.NoError(t, err)
	return dead
}

// TestReplayerOutageDoesNotDeadLetterValidWrites: failed replays during an
// outage (half-open probes included) counted as attempts, so a 45 s outage
// dead-lettered good orders, and with a breaker that never opened 119 of
// them. An outage must only delay the writes: they are replayed into it
// (the oldest due one at a time) more than twice MaxAttempts times each
// here, and all are applied once it ends.
func TestReplayerOutageDoesNotDeadLetterValidWrites(t *testing.T) {
	fast := circuit.Config{MinRequests: 2, OpenDuration: 20 * time.Millisecond}
	for name, cfg := range map[string]command.GroupConfig{
		"breaker opens and probes": {Strategy: command.Semaphore, Breaker: fast, CommandBreaker: fast},
		"breaker never opens": {Strategy: command.Semaphore, Breaker: circuit.Config{Mode: circuit.ForcedClosed},
			CommandBreaker: circuit.Config{Mode: circuit.ForcedClosed}},
	} {
		t.Run(name, func(t *testing.T) {
			g, _ := newGroup(t, cfg)
			q := openStore(t)
			rcv := newReceiver()
			rcv.setDown(true)
			const n = 5
			enqueueN(t, q, n)
			r := newReplayer(t, durable.ReplayerConfig{Queue: q, Group: g, Apply: rcv.apply,
				Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, Poll: time.Millisecond})
			runReplayer(t, r)
			require.Eventually(t, func() bool {
				total := 0
				for i := range n {
					total += rcv.count(rcv.deliveries, fmt.Sprint("k", i))
				}
				return total > 2*n*durable.DefaultMaxAttempts
			}, 30*time.Second, time.Millisecond, "the writes are replayed into the outage more than twice MaxAttempts times each")
			assert.Empty(t, deadLetters(t, q), "an outage dead-letters nothing")
			es, err := q.Lease(context.Background(), time.Now().Add(time.Hour), n)
			require.NoError(t, err)
			require.Len(t, es, n)
			for _, e := range es {
				assert.Zero(t, e.Attempts, "an outage uses no attempt")
			}
			assert.Greater(t, es[0].Deliveries, durable.DefaultMaxAttempts)
			assert.Contains(t, es[0].LastError, errDown.Error())

			rcv.setDown(false)
			require.Eventually(t, func() bool { return r.Stats().Replayed == n }, 30*time.Second, time.Millisecond)
			for i := range n {
				assert.Equal(t, 1, rcv.count(rcv.applied, fmt.Sprint("k", i)))
			}
			assert.Empty(t, deadLetters(t, q))
			assert.Positive(t, r.Stats().Outages)
		})
	}
}

// A timeout is an outage too: no attempt, no dead letter.
func TestReplayerTimeoutIsAnOutage(t *testing.T) {
	g, _ := newGroup(t, command.GroupConfig{Strategy: command.Semaphore, Timeout: 5 * time.Millisecond,
		Breaker: circuit.Config{Mode: circuit.ForcedClosed}, CommandBreaker: circuit.Config{Mode: circuit.ForcedClosed}})
	q := openStore(t)
	enqueueN(t, q, 1)
	var calls atomic.Int64
	r := newReplayer(t, durable.ReplayerConfig{Queue: q, Group: g, Backoff: time.Millisecond, MaxBackoff: time.Millisecond, Poll: time.Millisecond,
		Apply: func(ctx context.Context, _ durable.Entry) error { calls.Add(1); <-ctx.Done(); return ctx.Err() }})
	for calls.Load() <= durable.DefaultMaxAttempts {
		_, err := r.Drain(context.Background())
		require.NoError(t, err)
		time.Sleep(2 * time.Millisecond)
	}
	assert.Empty(t, deadLetters(t, q))
	es, err := q.Lease(context.Background(), time.Now().Add(time.Hour), 1)
	require.NoError(t, err)
	require.Len(t, es, 1)
	assert.Zero(t, es[0].Attempts)
	assert.GreaterOrEqual(t, es[0].Deliveries, durable.DefaultMaxAttempts+1)
}

// After an outage failure the round stops, the entry waits its backoff,
// and the replayer itself backs off: an outage is probed at a bounded
// rate, not once per entry per Poll.
func TestReplayerOutageBacksOff(t *testing.T) {
	g, _ := newGroup(t, command.GroupConfig{Strategy: command.Semaphore,
		Breaker: circuit.Config{Mode: circuit.ForcedClosed}, CommandBreaker: circuit.Config{Mode: circuit.ForcedClosed}})
	q := openStore(t)
	rcv := newReceiver()
	rcv.setDown(true)
	enqueueN(t, q, 5)
	r := newReplayer(t, durable.ReplayerConfig{Queue: q, Group: g, Apply: rcv.apply, Backoff: time.Hour, MaxBackoff: time.Hour})
	before := time.Now()
	_, err := r.Drain(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, rcv.count(rcv.deliveries, "k0"), "one replay into the outage")
	assert.Zero(t, rcv.count(rcv.deliveries, "k1"), "the round stopped at the outage")
	es, err := q.Lease(context.Background(), time.Now(), 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"k1", "k2", "k3", "k4"}, keysOf(es), "k0 waits its backoff")
	later, err := q.Lease(context.Background(), before.Add(3*time.Hour), 10)
	require.NoError(t, err)
	require.Equal(t, "k0", later[0].Key)
	assert.WithinDuration(t, before.Add(time.Hour), later[0].NotBefore, time.Minute)

	// Run: with Poll 1 ms and no backoff it would replay about a thousand
	// times a second; the backoff (10 ms doubling to 80 ms) allows a few.
	r = newReplayer(t, durable.ReplayerConfig{Queue: q, Group: g, Apply: rcv.apply,
		Backoff: 10 * time.Millisecond, MaxBackoff: 80 * time.Millisecond, Poll: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, r.Run(ctx), context.DeadlineExceeded)
	total := 0
	for i := range 5 {
		total += rcv.count(rcv.deliveries, fmt.Sprint("k", i))
	}
	assert.Less(t, total, 50, "deliveries into a 0.5 s outage")
	assert.Empty(t, deadLetters(t, q))
}

func keysOf(es []durable.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Key
	}
	return out
}

// An outage older than MaxAge dead-letters its writes, with that reason;
// a younger one does not.
func TestReplayerMaxAgeDeadLettersAfterOutage(t *testing.T) {
	g, logs := newGroup(t)
	q := openStore(t)
	rcv := newReceiver()
	rcv.setDown(true)
	for _, e := range []struct {
		key string
		age time.Duration
	}{{"old", 2 * time.Hour}, {"young", 10 * time.Minute}} {
		_, err := q.Enqueue(context.Background(), durable.Entry{Key: e.key, Command: "createOrder", EnqueuedAt: time.Now().Add(-e.age)})
		require.NoError(t, err)
	}
	r := newReplayer(t, durable.ReplayerConfig{Logger: slog.New(slog.NewTextHandler(logs, nil)), Queue: q, Group: g, Apply: rcv.apply, MaxAge: time.Hour,
		Backoff: time.Millisecond, MaxBackoff: time.Millisecond})
	for rcv.count(rcv.deliveries, "young") < 2 {
		_, err := r.Drain(context.Background())
		require.NoError(t, err)
		time.Sleep(2 * time.Millisecond)
	}
	dead := deadLetters(t, q)
	require.Len(t, dead, 1)
	assert.Equal(t, "old", dead[0].Key)
	assert.Equal(t, durable.ReasonMaxAge, dead[0].Reason)
	assert.Zero(t, dead[0].Attempts)
	assert.Equal(t, 1, dead[0].Deliveries)
	assert.Contains(t, dead[0].LastError, "MaxAge 1h0m0s")
	assert.Contains(t, dead[0].LastError, errDown.Error())
	assert.Contains(t, logs.String(), "reason=max_age")
}

// Refusals the classifier judges Refused are attempts: MaxAttempts of them
// dead-letter the write; the operator may requeue it.
func TestReplayerDeadLettersAfterMaxAttempts(t *testing.T) {
	g, logs := newGroup(t)
	q := openStore(t)
	rcv := newReceiver()
	rcv.refuse["k0"] = true
	enqueueN(t, q, 1)
	var dead []durable.Entry
	var mu sync.Mutex
	r := newReplayer(t, durable.ReplayerConfig{Logger: slog.New(slog.NewTextHandler(logs, nil)), Queue: q, Group: g, Apply: rcv.apply, Classify: refusedIsRefused,
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
	assert.Equal(t, durable.DefaultMaxAttempts, dead[0].Deliveries)
	assert.Equal(t, durable.ReasonAttempts, dead[0].Reason)
	assert.Contains(t, dead[0].LastError, errRefused.Error())
	mu.Unlock()
	stored := deadLetters(t, q)
	require.Len(t, stored, 1)
	assert.Equal(t, "k0", stored[0].Key)
	assert.Equal(t, durable.ReasonAttempts, stored[0].Reason)
	assert.Contains(t, logs.String(), "deferred write dead-lettered")

	// The operator requeues it once the receiver accepts it.
	rcv.mu.Lock()
	rcv.refuse["k0"] = false
	rcv.mu.Unlock()
	require.NoError(t, q.Requeue(context.Background(), stored[0].ID))
	n, err := r.Drain(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, 1, rcv.count(rcv.applied, "k0"))
}

func TestReplayerBadRequestIsDeadLetteredAtOnce(t *testing.T) {
	g, _ := newGroup(t)
	q := openStore(t)
	enqueueN(t, q, 2)
	calls := 0
	r := newReplayer(t, durable.ReplayerConfig{Queue: q, Group: g, Apply: func(context.Context, durable.Entry) error {
		calls++
		return command.BadRequest(fmt.Errorf("order refused"))
	}, Classify: func(error) durable.Verdict { return durable.Permanent }})
	_, err := r.Drain(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, calls, "a refusal for good does not stop the round")
	dead := deadLetters(t, q)
	require.Len(t, dead, 2)
	assert.Equal(t, durable.ReasonBadRequest, dead[0].Reason)
	assert.Equal(t, 1, dead[0].Attempts)
	assert.Contains(t, dead[0].LastError, "bad request: order refused")
}

// A classifier's Permanent dead-letters at once; a panic in Apply is
// Refused by default; a panic in the classifier, or an unknown verdict, is
// an outage.
func TestReplayerClassify(t *testing.T) {
	for name, tc := range map[string]struct {
		apply    durable.ApplyFunc
		classify func(error) durable.Verdict
		reason   string // "" for no dead letter
		attempts int
	}{
		"permanent":         {failing, func(error) durable.Verdict { return durable.Permanent }, durable.ReasonBadRequest, 1},
		"panic in Apply":    {func(context.Context, durable.Entry) error { panic("boom") }, nil, durable.ReasonAttempts, durable.DefaultMaxAttempts},
		"classifier panics": {failing, func(error) durable.Verdict { panic("oops") }, "", 0},
		"unknown verdict":   {failing, func(error) durable.Verdict { return durable.Verdict(42) }, "", 0},
	} {
		t.Run(name, func(t *testing.T) {
			g, logs := newGroup(t)
			q := openStore(t)
			enqueueN(t, q, 1)
			r := newReplayer(t, durable.ReplayerConfig{Logger: slog.New(slog.NewTextHandler(logs, nil)), Queue: q, Group: g, Apply: tc.apply, Classify: tc.classify,
				Backoff: time.Millisecond, MaxBackoff: time.Millisecond})
			for range 2 * durable.DefaultMaxAttempts {
				_, err := r.Drain(context.Background())
				require.NoError(t, err)
				time.Sleep(2 * time.Millisecond)
			}
			dead := deadLetters(t, q)
			if tc.reason == "" {
				assert.Empty(t, dead)
				assert.Contains(t, logs.String(), "the failure counts as an outage")
				return
			}
			require.Len(t, dead, 1)
			assert.Equal(t, tc.reason, dead[0].Reason)
			assert.Equal(t, tc.attempts, dead[0].Attempts)
		})
	}
	assert.Equal(t, "refused", durable.Refused.String())
}

// TestReplayerDeadLetterSaysDeliveries: a write applied by the receiver
// and then dead-lettered read "3 attempts, the last one interrupted",
// which hid that it had reached the receiver. The dead letter counts the
// deliveries that may have reached it apart from the attempts: the
// original call, a replay cut off (here by its ctx), and the refusals.
func TestReplayerDeadLetterSaysDeliveries(t *testing.T) {
	g, _ := newGroup(t)
	q := openStore(t)
	rcv := newReceiver()
	rcv.setDown(true)
	_, info, err := command.ExecuteInfo(context.Background(), g, durable.Write{Command: "createOrder", Key: "k0", Apply: rcv.apply, Queue: q})
	require.NoError(t, err)
	require.True(t, info.Events.Has(metrics.DegradedDeferred))

	ctx, cancel := context.WithCancel(context.Background())
	cut := newReplayer(t, durable.ReplayerConfig{Queue: q, Group: g, Apply: func(ctx context.Context, e durable.Entry) error {
		rcv.setDown(false)
		_ = rcv.apply(ctx, e) // applied, and then the replayer stops before its answer
		cancel()
		return ctx.Err()
	}})
	_, err = cut.Drain(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, rcv.count(rcv.applied, "k0"))

	rcv.mu.Lock()
	rcv.refuse["k0"] = true // say, a duplicate order number, since it was applied
	rcv.mu.Unlock()
	r := newReplayer(t, durable.ReplayerConfig{Queue: q, Group: g, Apply: rcv.apply, Classify: refusedIsRefused,
		Backoff: time.Millisecond, MaxBackoff: time.Millisecond})
	for len(deadLetters(t, q)) == 0 {
		es, err := q.Lease(context.Background(), time.Now().Add(time.Hour), 1)
		require.NoError(t, err)
		if len(es) > 0 {
			es[0].NotBefore = time.Time{}
			require.NoError(t, q.Update(context.Background(), es[0]))
		}
		_, err = r.Drain(context.Background())
		require.NoError(t, err)
	}
	dead := deadLetters(t, q)[0]
	assert.Equal(t, durable.DefaultMaxAttempts, dead.Attempts, "refusals")
	assert.Equal(t, rcv.count(rcv.deliveries, "k0"), dead.Deliveries, "every delivery that reached the receiver")
	assert.Equal(t, 2+durable.DefaultMaxAttempts, dead.Deliveries, "the original call, the one cut off, the refusals")
}

// A delivery cut off (by a crash, or here its ctx) is no attempt: an
// entry whose deliveries were all cut off is replayed, not dead-lettered.
// One that used MaxAttempts already (MaxAttempts was lowered) is
// dead-lettered without a replay.
func TestReplayerInterruptedDeliveryIsNoAttempt(t *testing.T) {
	g, _ := newGroup(t)
	q := openStore(t)
	rcv := newReceiver()
	enqueueN(t, q, 2)
	es, err := q.Lease(context.Background(), time.Now(), 2)
	require.NoError(t, err)
	es[0].Deliveries = 10
	require.NoError(t, q.Update(context.Background(), es[0]))
	es[1].Attempts = 2
	require.NoError(t, q.Update(context.Background(), es[1]))
	r := newReplayer(t, durable.ReplayerConfig{Queue: q, Group: g, Apply: rcv.apply, MaxAttempts: 2})
	n, err := r.Drain(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, 1, rcv.count(rcv.applied, "k0"))
	assert.Zero(t, rcv.count(rcv.deliveries, "k1"))
	dead := deadLetters(t, q)
	require.Len(t, dead, 1)
	assert.Equal(t, durable.ReasonAttempts, dead[0].Reason)
}

// TestReplayerCorruptEntryDoesNotBlockTheQueue: one entry that did not
// decode ("corrupt entry 0000000000000001") failed every Lease, and 0 of
// 19 intact entries were replayed. It is quarantined as a dead letter
// with reason corrupt, and the others are applied.
func TestReplayerCorruptEntryDoesNotBlockTheQueue(t *testing.T) {
	g, logs := newGroup(t)
	path := filepath.Join(t.TempDir(), "queue.db")
	q, err := durable.OpenStore(path)
	require.NoError(t, err)
	enqueueN(t, q, 20)
	require.NoError(t, q.Close())
	rewrite(t, path, "pending", "1", []byte("{"))
	q, err = durable.OpenStore(path)
	require.NoError(t, err)
	defer q.Close()

	rcv := newReceiver()
	var quarantined []durable.Entry
	r := newReplayer(t, durable.ReplayerConfig{Logger: slog.New(slog.NewTextHandler(logs, nil)), Queue: q, Group: g, Apply: rcv.apply,
		OnDeadLetter: func(e durable.Entry) { quarantined = append(quarantined, e) }})
	n, err := r.Drain(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 19, n, "every intact entry is replayed")
	assert.Zero(t, rcv.count(rcv.deliveries, "k0"), "the corrupt one is never replayed")
	require.Len(t, quarantined, 1)
	dead := deadLetters(t, q)
	require.Len(t, dead, 1)
	assert.Equal(t, durable.ReasonCorrupt, dead[0].Reason)
	assert.Equal(t, "k0", dead[0].Key)
	assert.Contains(t, dead[0].LastError, path)
	assert.ErrorIs(t, q.Requeue(context.Background(), dead[0].ID), durable.ErrCorrupt)
	assert.Contains(t, logs.String(), "reason=corrupt")
	st, err := q.Stats(context.Background())
	require.NoError(t, err)
	assert.Zero(t, st.Depth)
	assert.Equal(t, 1, st.DeadLetters)
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
		"max age":     {func(c *durable.ReplayerConfig) { c.MaxAge = -2 * time.Second }, "MaxAge -2s"},
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
	cfg := ok
	cfg.MaxAge = durable.NoMaxAge
	_, err := durable.NewReplayer(cfg)
	assert.NoError(t, err)
}
