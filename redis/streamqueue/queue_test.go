package streamqueue_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/durable"
	"github.com/bulwark-go/bulwark/durable/queuetest"
	"github.com/bulwark-go/bulwark/internal/logtest"
	"github.com/bulwark-go/bulwark/internal/redistest"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/redis/streamqueue"
)

// uniqueName returns a queue name of its own for t on a shared server.
func uniqueName(t *testing.T) string {
	return strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()) + fmt.Sprint("-", rand.Uint64())
}

// client returns a client of addr, closed when t ends.
func client(t *testing.T, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func newQueue(t *testing.T, rdb *redis.Client, cfg streamqueue.Config) *streamqueue.Queue {
	t.Helper()
	cfg.Client = rdb
	q, err := streamqueue.New(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, q.Close()) })
	return q
}

func TestConformance(t *testing.T) {
	rdb := client(t, redistest.Shared(t))
	queuetest.Run(t, func(t *testing.T) durable.Queue {
		return newQueue(t, rdb, streamqueue.Config{Name: uniqueName(t)})
	})
}

// TestCorruptEntryConformance damages an entry by overwriting its meta
// with bytes that are not JSON.
func TestCorruptEntryConformance(t *testing.T) {
	rdb := client(t, redistest.Shared(t))
	name := uniqueName(t)
	queuetest.Corrupt(t, func(t *testing.T) durable.Queue {
		return newQueue(t, rdb, streamqueue.Config{Name: name})
	}, func(t *testing.T, _ durable.Queue, id string) {
		require.NoError(t, rdb.HSet(context.Background(), "bulwark:queue:{"+name+"}:meta", id, "{not json").Err())
	})
}

// TestRedisRestartedEmptyReplaysAgain: after Redis restarted empty (or was
// flushed) the consumer group was gone, created only in New: 20 writes
// accepted after the restart, 0 applied after 5 s, the backlog at 20 and
// no error. The first NOGROUP answer must recreate the group, say so once,
// and the writes accepted since must be replayed. The restart is real: a
// private redis-server killed and started again, empty, on its address.
func TestRedisRestartedEmptyReplaysAgain(t *testing.T) {
	for name, lose := range map[string]func(*redistest.Server, *redis.Client){
		"restart": func(srv *redistest.Server, _ *redis.Client) { srv.Restart() },
		"flushall": func(_ *redistest.Server, rdb *redis.Client) {
			require.NoError(t, rdb.FlushAll(context.Background()).Err())
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := client(t, srv.Addr)
			logs := new(logtest.Buffer)
			logger := slog.New(slog.NewTextHandler(logs, nil))
			q := newQueue(t, rdb, streamqueue.Config{Name: "orders", Logger: logger})
			reg := command.NewRegistry(command.RegistryConfig{Logger: logger})
			t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
			g, err := reg.NewGroup("orders", command.GroupConfig{Strategy: command.Semaphore})
			require.NoError(t, err)
			var mu sync.Mutex
			applied := map[string]int{}
			apply := func(_ context.Context, e durable.Entry) error {
				mu.Lock()
				defer mu.Unlock()
				applied[e.Key]++
				return nil
			}
			r, err := durable.NewReplayer(durable.ReplayerConfig{Queue: q, Group: g, Apply: apply, Poll: 10 * time.Millisecond, Logger: logger})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- r.Run(ctx) }()
			defer func() { cancel(); require.ErrorIs(t, <-done, context.Canceled) }()
			count := func() int { mu.Lock(); defer mu.Unlock(); return len(applied) }

			_, err = q.Enqueue(ctx, durable.Entry{Key: "before"})
			require.NoError(t, err)
			require.Eventually(t, func() bool { return count() == 1 }, 10*time.Second, 5*time.Millisecond)

			lose(srv, rdb)
			for i := range 20 {
				require.Eventually(t, func() bool {
					_, err := q.Enqueue(ctx, durable.Entry{Key: fmt.Sprint("after-", i)})
					return err == nil
				}, 10*time.Second, 10*time.Millisecond, "accepted once Redis is back")
			}
			require.Eventually(t, func() bool { return count() == 21 }, 20*time.Second, 5*time.Millisecond,
				"the writes accepted after Redis lost its state are replayed")
			require.Eventually(t, func() bool { return r.Stats().Depth == 0 }, 10*time.Second, 5*time.Millisecond)
			st, err := q.Stats(ctx)
			require.NoError(t, err)
			assert.Equal(t, int64(1), st.Resets)
			assert.Equal(t, 1, strings.Count(logs.String(), "consumer group was gone"), "said once")
			mu.Lock()
			defer mu.Unlock()
			for key, n := range applied {
				assert.Equal(t, 1, n, key)
			}
		})
	}
}

// TestKillLoopUnderOutagesLosesNoWrite runs the kill -9 loop (see
// queuetest.Crash) on a real redis-server, with a writer, a replayer and
// a service process (writing and replaying) at once: each child is a new
// consumer, and the entries a killed one held are claimed by another.
// Outages and kills once dead-lettered valid writes.
func TestKillLoopUnderOutagesLosesNoWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	t.Setenv(addrEnv, redistest.Shared(t))
	t.Setenv(nameEnv, uniqueName(t))
	queuetest.Crash(t, openFromEnv, queuetest.Writer, queuetest.Replayer, queuetest.Service)
}

// twoConsumers returns consumers a and b of a new queue on the shared
// server; b claims a's entries once idle for claimAfter.
func twoConsumers(t *testing.T, claimAfter time.Duration) (a, b *streamqueue.Queue) {
	rdb := client(t, redistest.Shared(t))
	name := uniqueName(t)
	a = newQueue(t, rdb, streamqueue.Config{Name: name, Consumer: "a"})
	b = newQueue(t, rdb, streamqueue.Config{Name: name, Consumer: "b", ClaimAfter: claimAfter})
	return a, b
}

// The entries a consumer leased and never finished (its process died) are
// claimed by another consumer once idle for ClaimAfter, and not before.
func TestDeadConsumersEntriesAreClaimed(t *testing.T) {
	ctx := context.Background()
	a, b := twoConsumers(t, 200*time.Millisecond)
	for i := range 3 {
		_, err := a.Enqueue(ctx, durable.Entry{Key: fmt.Sprint("k", i)})
		require.NoError(t, err)
	}
	held, err := a.Lease(ctx, time.Now(), 10)
	require.NoError(t, err)
	require.Len(t, held, 3)

	got, err := b.Lease(ctx, time.Now(), 10)
	require.NoError(t, err)
	assert.Empty(t, got, "a live consumer's entries are not claimed at once")
	var claimed []durable.Entry
	require.Eventually(t, func() bool {
		claimed, err = b.Lease(ctx, time.Now(), 10)
		return err == nil && len(claimed) == 3
	}, 10*time.Second, 20*time.Millisecond)
	for i, e := range claimed {
		assert.Equal(t, held[i].ID, e.ID)
		require.NoError(t, b.Ack(ctx, e))
	}
	got, err = a.Lease(ctx, time.Now(), 10)
	require.NoError(t, err)
	assert.Empty(t, got, "acknowledged entries are gone for every consumer")
}

// TestStaleLeaseIsNotReplayed: a consumer that leased an entry and was
// slow to replay it, while another claimed it, replayed it too, each
// storing the deliveries it had read: the dead letter then counted fewer
// deliveries than had reached the receiver. Update by a consumer that no
// longer holds the entry fails with ErrNotFound and changes nothing.
func TestStaleLeaseIsNotReplayed(t *testing.T) {
	ctx := context.Background()
	a, b := twoConsumers(t, 50*time.Millisecond)
	_, err := a.Enqueue(ctx, durable.Entry{Key: "k"})
	require.NoError(t, err)
	stale, err := a.Lease(ctx, time.Now(), 1)
	require.NoError(t, err)
	require.Len(t, stale, 1)
	var claimed []durable.Entry
	require.Eventually(t, func() bool {
		claimed, err = b.Lease(ctx, time.Now(), 1)
		return err == nil && len(claimed) == 1
	}, 10*time.Second, 10*time.Millisecond)
	claimed[0].Deliveries = 1
	require.NoError(t, b.Update(ctx, claimed[0]))

	stale[0].Deliveries = 1
	assert.ErrorIs(t, a.Update(ctx, stale[0]), durable.ErrNotFound, "a's lease is stale")
	claimed[0].Deliveries = 2
	require.NoError(t, b.Update(ctx, claimed[0]), "b holds it")
	again, err := b.Lease(ctx, time.Now(), 1)
	require.NoError(t, err)
	require.Len(t, again, 1)
	assert.Equal(t, 2, again[0].Deliveries)
}

// With Redis down, a write is not accepted, and New fails.
func TestRedisDownIsNotAccepted(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	q := newQueue(t, rdb, streamqueue.Config{Name: "down"})
	reg := command.NewRegistry(command.RegistryConfig{})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("orders", command.GroupConfig{Strategy: command.Semaphore})
	require.NoError(t, err)
	down := func(context.Context, durable.Entry) error { return fmt.Errorf("backend down") }

	_, info, err := command.ExecuteInfo(context.Background(), g, durable.Write{Command: "createOrder", Key: "k1", Apply: down, Queue: q})
	require.NoError(t, err)
	require.True(t, info.Events.Has(metrics.DegradedDeferred), "accepted while Redis is up")

	srv.Kill()
	_, info, err = command.ExecuteInfo(context.Background(), g, durable.Write{Command: "createOrder", Key: "k2", Apply: down, Queue: q})
	assert.ErrorIs(t, err, durable.ErrNotAccepted)
	assert.False(t, info.Events.Has(metrics.DegradedDeferred))
	_, err = streamqueue.New(context.Background(), streamqueue.Config{Client: rdb, Name: "other"})
	assert.Error(t, err)
}

func TestConfigErrors(t *testing.T) {
	rdb := client(t, redistest.Shared(t))
	for _, cfg := range []streamqueue.Config{
		{Name: "x"},
		{Client: rdb},
		{Client: rdb, Name: "a{b}"},
		{Client: rdb, Name: "x", ClaimAfter: -time.Second},
		{Client: rdb, Name: "x", Retention: durable.Retention{Age: -time.Second}},
		{Client: rdb, Name: "x", Retention: durable.Retention{Records: -1}},
	} {
		_, err := streamqueue.New(context.Background(), cfg)
		assert.ErrorIs(t, err, durable.ErrInvalidConfig)
	}
}

func TestStatusHTTP(t *testing.T) {
	rdb := client(t, redistest.Shared(t))
	queuetest.StatusHTTP(t, func(t *testing.T) durable.Queue {
		return newQueue(t, rdb, streamqueue.Config{Name: uniqueName(t)})
	})
}

// TestOutcomes counts a queue's outcome records in Redis: the hash of
// records and the sorted set that orders them must agree.
func TestOutcomes(t *testing.T) {
	rdb := client(t, redistest.Shared(t))
	names := map[durable.Queue]string{}
	queuetest.Outcomes(t, func(t *testing.T, r durable.Retention) durable.Queue {
		name := uniqueName(t)
		q := newQueue(t, rdb, streamqueue.Config{Name: name, Retention: r})
		names[q] = name
		return q
	}, func(t *testing.T, q durable.Queue) int {
		p := "bulwark:queue:{" + names[q] + "}:"
		records, err := rdb.HLen(context.Background(), p+"outcome").Result()
		require.NoError(t, err)
		listed, err := rdb.ZCard(context.Background(), p+"order").Result()
		require.NoError(t, err)
		require.Equal(t, records, listed, "records and their order agree")
		return int(records)
	})
}

// A requeued entry gets a new stream ID; Status of its first ID follows it
// through a second dead letter and requeue to its outcome.
func TestStatusFollowsRequeues(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t, client(t, redistest.Shared(t)), streamqueue.Config{Name: uniqueName(t)})
	first, err := q.Enqueue(ctx, durable.Entry{Key: "k"})
	require.NoError(t, err)
	ids := []string{first}
	for range 2 {
		es, err := q.Lease(ctx, time.Now(), 1)
		require.NoError(t, err)
		es[0].Reason = durable.ReasonMaxAge
		require.NoError(t, q.DeadLetter(ctx, es[0]))
		require.NoError(t, q.Requeue(ctx, es[0].ID))
	}
	es, err := q.Lease(ctx, time.Now(), 1)
	require.NoError(t, err)
	ids = append(ids, es[0].ID)
	assert.NotEqual(t, first, es[0].ID)
	require.NoError(t, q.Ack(ctx, es[0]))
	for _, id := range ids {
		st, err := q.Status(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, durable.StateApplied, st.State)
		assert.Equal(t, es[0].ID, st.Entry.ID, "the ID the write has now")
	}
}

// An outcome record that does not decode, or whose requeue points back,
// is an error wrapping ErrCorrupt, never "applied" nor a loop.
func TestStatusCorruptOutcomeRecord(t *testing.T) {
	ctx := context.Background()
	rdb := client(t, redistest.Shared(t))
	name := uniqueName(t)
	q := newQueue(t, rdb, streamqueue.Config{Name: name})
	id, err := q.Enqueue(ctx, durable.Entry{Key: "k"})
	require.NoError(t, err)
	es, err := q.Lease(ctx, time.Now(), 1)
	require.NoError(t, err)
	require.NoError(t, q.Ack(ctx, es[0]))
	key := "bulwark:queue:{" + name + "}:outcome"
	for _, raw := range []string{"{not json", `{"requeued_as":"` + id + `"}`, `{"requeued_as":"0-1"}`, `{"applied":"soon"}`} {
		require.NoError(t, rdb.HSet(ctx, key, id, raw).Err())
		_, err := q.Status(ctx, id)
		assert.ErrorIs(t, err, durable.ErrCorrupt, raw)
	}
}
