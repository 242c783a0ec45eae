// Package queuetest is the conformance suite of durable.Queue: every
// backend runs it, so that all behave the same. Corrupt checks how a
// backend treats a damaged entry, and Crash kills writer and replayer
// processes at random points.
//
//	func TestConformance(t *testing.T) {
//		queuetest.Run(t, func(t *testing.T) durable.Queue { return newEmptyQueue(t) })
//	}
package queuetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/durable"
)

// Run runs the suite. open returns a new, empty queue for one subtest; it
// may close it when t ends (Close must then be idempotent, which the suite
// checks).
func Run(t *testing.T, open func(t *testing.T) durable.Queue) {
	tests := []struct {
		name string
		fn   func(t *testing.T, q durable.Queue)
	}{
		{"EnqueueThenLease", enqueueThenLease},
		{"EnqueueIsIdempotentPerKey", enqueueIdempotent},
		{"InvalidEntry", invalidEntry},
		{"LeaseOldestFirstUpToMax", leaseOrder},
		{"UpdateDefersUntilNotBefore", updateNotBefore},
		{"AckRecordsApplied", ackApplied},
		{"UnknownIDs", unknownIDs},
		{"DeadLetterAndRequeue", deadLetterRequeue},
		{"StatsOldest", statsOldest},
		{"ConcurrentEnqueue", concurrentEnqueue},
		{"Close", closeQueue},
		{"Status", statusStates},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

var ctx = context.Background()

func entry(key string) durable.Entry {
	return durable.Entry{Key: key, Group: "g", Command: "write", Payload: []byte("payload " + key)}
}

func enqueue(t *testing.T, q durable.Queue, key string) string {
	t.Helper()
	id, err := q.Enqueue(ctx, entry(key))
	require.NoError(t, err)
	require.NotEmpty(t, id)
	return id
}

func lease(t *testing.T, q durable.Queue, max int) []durable.Entry {
	t.Helper()
	es, err := q.Lease(ctx, time.Now(), max)
	require.NoError(t, err)
	return es
}

func keys(es []durable.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Key
	}
	return out
}

func enqueueThenLease(t *testing.T, q durable.Queue) {
	before := time.Now()
	id := enqueue(t, q, "k1")
	es := lease(t, q, 10)
	require.Len(t, es, 1)
	e := es[0]
	assert.Equal(t, id, e.ID)
	assert.Equal(t, "k1", e.Key)
	assert.Equal(t, "g", e.Group)
	assert.Equal(t, "write", e.Command)
	assert.Equal(t, []byte("payload k1"), e.Payload)
	assert.Zero(t, e.Attempts)
	assert.Zero(t, e.Deliveries)
	assert.Empty(t, e.Reason)
	assert.WithinDuration(t, before, e.EnqueuedAt, time.Minute)

	d := entry("k2")
	d.Deliveries, d.Attempts, d.LastError, d.Reason = 1, 2, "x", "y"
	_, err := q.Enqueue(ctx, d)
	require.NoError(t, err)
	es = lease(t, q, 10)
	require.Len(t, es, 2)
	assert.Equal(t, 1, es[1].Deliveries, "Enqueue keeps the original call's delivery")
	assert.Zero(t, es[1].Attempts)
	assert.Empty(t, es[1].LastError)
	assert.Empty(t, es[1].Reason)
}

func enqueueIdempotent(t *testing.T, q durable.Queue) {
	id := enqueue(t, q, "k1")
	assert.Equal(t, id, enqueue(t, q, "k1"), "a retried request keeps its entry")
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, st.Depth)
}

func invalidEntry(t *testing.T, q durable.Queue) {
	_, err := q.Enqueue(ctx, durable.Entry{Payload: []byte("x")})
	assert.ErrorIs(t, err, durable.ErrInvalidEntry)
	_, err = q.Enqueue(ctx, entry(string(make([]byte, durable.MaxKeyLen+1))))
	assert.ErrorIs(t, err, durable.ErrInvalidEntry)
	e := entry("k")
	e.Deliveries = -1
	_, err = q.Enqueue(ctx, e)
	assert.ErrorIs(t, err, durable.ErrInvalidEntry)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Depth)
}

func leaseOrder(t *testing.T, q durable.Queue) {
	for i := range 5 {
		enqueue(t, q, fmt.Sprint("k", i))
	}
	assert.Equal(t, []string{"k0", "k1", "k2"}, keys(lease(t, q, 3)))
	assert.Equal(t, []string{"k0", "k1", "k2", "k3", "k4"}, keys(lease(t, q, 10)))
}

func updateNotBefore(t *testing.T, q durable.Queue) {
	enqueue(t, q, "k1")
	enqueue(t, q, "k2")
	e := lease(t, q, 1)[0]
	e.Attempts, e.Deliveries, e.NotBefore, e.LastError = 2, 5, time.Now().Add(time.Hour), "boom"
	require.NoError(t, q.Update(ctx, e))
	assert.Equal(t, []string{"k2"}, keys(lease(t, q, 10)), "k1 is not due")
	later, err := q.Lease(ctx, time.Now().Add(2*time.Hour), 10)
	require.NoError(t, err)
	require.Equal(t, []string{"k1", "k2"}, keys(later))
	assert.Equal(t, 2, later[0].Attempts)
	assert.Equal(t, 5, later[0].Deliveries)
	assert.Equal(t, "boom", later[0].LastError)
	assert.Equal(t, []byte("payload k1"), later[0].Payload, "Update keeps the payload")
}

func ackApplied(t *testing.T, q durable.Queue) {
	id := enqueue(t, q, "k1")
	e := lease(t, q, 1)[0]
	applied, err := q.Applied(ctx, "k1")
	require.NoError(t, err)
	assert.False(t, applied)
	require.NoError(t, q.Ack(ctx, e))
	require.NoError(t, q.Ack(ctx, e), "a second Ack is a no-op")
	applied, err = q.Applied(ctx, "k1")
	require.NoError(t, err)
	assert.True(t, applied)
	assert.Empty(t, lease(t, q, 10))
	again, err := q.Enqueue(ctx, entry("k1"))
	require.NoError(t, err)
	assert.Equal(t, id, again, "an applied key is not queued again")
	assert.Empty(t, lease(t, q, 10))
}

func unknownIDs(t *testing.T, q durable.Queue) {
	enqueue(t, q, "k1")
	e := lease(t, q, 1)[0]
	require.NoError(t, q.Ack(ctx, e))
	ghost := durable.Entry{ID: "999999", Key: "ghost"}
	assert.ErrorIs(t, q.Ack(ctx, ghost), durable.ErrNotFound)
	assert.ErrorIs(t, q.Update(ctx, e), durable.ErrNotFound, "an acknowledged entry is gone")
	assert.ErrorIs(t, q.DeadLetter(ctx, e), durable.ErrNotFound)
	assert.ErrorIs(t, q.Requeue(ctx, e.ID), durable.ErrNotFound)
	assert.ErrorIs(t, q.Requeue(ctx, "not-an-id"), durable.ErrNotFound)
}

func deadLetterRequeue(t *testing.T, q durable.Queue) {
	id := enqueue(t, q, "k1")
	enqueue(t, q, "k2")
	e := lease(t, q, 1)[0]
	e.Attempts, e.Deliveries, e.LastError, e.Reason = 3, 4, "receiver down", durable.ReasonAttempts
	require.NoError(t, q.DeadLetter(ctx, e))
	assert.Equal(t, []string{"k2"}, keys(lease(t, q, 10)))
	dead, err := q.DeadLetters(ctx)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	assert.Equal(t, id, dead[0].ID)
	assert.Equal(t, 3, dead[0].Attempts)
	assert.Equal(t, 4, dead[0].Deliveries)
	assert.Equal(t, "receiver down", dead[0].LastError)
	assert.Equal(t, durable.ReasonAttempts, dead[0].Reason)
	assert.Equal(t, []byte("payload k1"), dead[0].Payload)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, st.Depth)
	assert.Equal(t, 1, st.DeadLetters)
	again, err := q.Enqueue(ctx, entry("k1"))
	require.NoError(t, err)
	assert.Equal(t, id, again, "a dead-lettered key is not queued again")

	require.NoError(t, q.Requeue(ctx, id))
	dead, err = q.DeadLetters(ctx)
	require.NoError(t, err)
	assert.Empty(t, dead)
	es := lease(t, q, 10)
	assert.ElementsMatch(t, []string{"k1", "k2"}, keys(es))
	for _, e := range es {
		assert.Zero(t, e.Attempts, "a requeued entry starts afresh")
		assert.Empty(t, e.Reason)
		if e.Key == "k1" {
			assert.Equal(t, 4, e.Deliveries, "its deliveries may have reached the receiver: kept")
		}
	}
}

func statsOldest(t *testing.T, q durable.Queue) {
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, durable.Stats{}, st)
	e := entry("k1")
	e.EnqueuedAt = time.Now().Add(-time.Hour)
	_, err = q.Enqueue(ctx, e)
	require.NoError(t, err)
	enqueue(t, q, "k2")
	st, err = q.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, st.Depth)
	assert.WithinDuration(t, e.EnqueuedAt, st.Oldest, time.Second)
}

func concurrentEnqueue(t *testing.T, q durable.Queue) {
	const n = 40
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id, err := q.Enqueue(ctx, entry(fmt.Sprint("k", i)))
			assert.NoError(t, err)
			ids[i] = id
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, id := range ids {
		assert.False(t, seen[id], "duplicate id %s", id)
		seen[id] = true
	}
	assert.Len(t, lease(t, q, 2*n), n)
}

func closeQueue(t *testing.T, q durable.Queue) {
	enqueue(t, q, "k1")
	require.NoError(t, q.Close())
	require.NoError(t, q.Close(), "Close is idempotent")
	_, err := q.Enqueue(ctx, entry("k2"))
	assert.ErrorIs(t, err, durable.ErrClosed, "a closed queue accepts nothing")
	_, err = q.Status(ctx, "1")
	assert.ErrorIs(t, err, durable.ErrClosed)
}
