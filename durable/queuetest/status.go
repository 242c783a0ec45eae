package queuetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/durable"
)

func status(t *testing.T, q durable.Queue, id string) durable.Status {
	t.Helper()
	st, err := q.Status(ctx, id)
	require.NoError(t, err, "status of %s", id)
	return st
}

// statusStates follows one write through accepted, applied, and another
// through dead-lettered, requeued (accepted again) and applied.
func statusStates(t *testing.T, q durable.Queue) {
	before := time.Now()
	id := enqueue(t, q, "k1")
	st := status(t, q, id)
	assert.Equal(t, durable.StateAccepted, st.State)
	assert.Equal(t, id, st.Entry.ID)
	assert.Equal(t, "k1", st.Entry.Key)
	assert.WithinDuration(t, before, st.Entry.EnqueuedAt, time.Minute)
	assert.Zero(t, st.AppliedAt)

	e := lease(t, q, 1)[0]
	e.Attempts, e.Deliveries, e.NotBefore = 1, 2, time.Now().Add(time.Hour)
	require.NoError(t, q.Update(ctx, e))
	st = status(t, q, id)
	assert.Equal(t, durable.StateAccepted, st.State)
	assert.Equal(t, 1, st.Entry.Attempts)
	assert.Equal(t, 2, st.Entry.Deliveries)
	assert.WithinDuration(t, e.NotBefore, st.Entry.NotBefore, time.Millisecond)

	acked := time.Now()
	require.NoError(t, q.Ack(ctx, e))
	st = status(t, q, id)
	assert.Equal(t, durable.StateApplied, st.State, "the outcome record outlives the entry")
	assert.Equal(t, id, st.Entry.ID)
	assert.Equal(t, "k1", st.Entry.Key)
	assert.Equal(t, "g", st.Entry.Group)
	assert.Equal(t, "write", st.Entry.Command)
	assert.Equal(t, 1, st.Entry.Attempts)
	assert.Equal(t, 2, st.Entry.Deliveries)
	assert.Empty(t, st.Entry.Payload, "an outcome record keeps no payload")
	assert.WithinDuration(t, before, st.Entry.EnqueuedAt, time.Minute)
	assert.False(t, st.AppliedAt.Before(acked.Add(-time.Second)), "applied at %v, acked at %v", st.AppliedAt, acked)
	assert.WithinDuration(t, acked, st.AppliedAt, time.Minute)
	require.NoError(t, q.Ack(ctx, e))
	assert.Equal(t, st.AppliedAt, status(t, q, id).AppliedAt, "a second Ack changes nothing")

	dead := enqueue(t, q, "k2")
	e = lease(t, q, 1)[0]
	e.Attempts, e.Deliveries, e.LastError, e.Reason = 3, 3, "refused", durable.ReasonAttempts
	require.NoError(t, q.DeadLetter(ctx, e))
	st = status(t, q, dead)
	assert.Equal(t, durable.StateDeadLettered, st.State)
	assert.Equal(t, "k2", st.Entry.Key)
	assert.Equal(t, durable.ReasonAttempts, st.Entry.Reason)
	assert.Equal(t, 3, st.Entry.Attempts)
	assert.Equal(t, 3, st.Entry.Deliveries)

	require.NoError(t, q.Requeue(ctx, dead))
	st = status(t, q, dead)
	assert.Equal(t, durable.StateAccepted, st.State, "a requeued write is accepted again, under its first ID too")
	assert.Equal(t, "k2", st.Entry.Key)
	assert.Zero(t, st.Entry.Attempts)
	e = lease(t, q, 1)[0]
	assert.Equal(t, st.Entry.ID, e.ID, "Status names the ID the write has now")
	require.NoError(t, q.Ack(ctx, e))
	st = status(t, q, dead)
	assert.Equal(t, durable.StateApplied, st.State)
	assert.Equal(t, "k2", st.Entry.Key)

	for _, id := range []string{"", "999999", "1-0", "not-an-id", "x"} {
		_, err := q.Status(ctx, id)
		assert.ErrorIs(t, err, durable.ErrNotFound, "id %q", id)
	}
}

// Outcomes checks the bound of a backend's outcome records (see
// durable.Retention). open returns a new, empty queue with that
// Retention; stored returns how many outcome records q holds in its
// storage (the backend's own way). Past Retention.Records, the oldest
// records go first; past Retention.Age, Status no longer reports a
// record and the next Ack drops it; the keys of applied writes are kept
// regardless (Applied).
func Outcomes(t *testing.T, open func(t *testing.T, r durable.Retention) durable.Queue, stored func(t *testing.T, q durable.Queue) int) {
	applyAll := func(t *testing.T, q durable.Queue, keys ...string) []string {
		t.Helper()
		ids := make([]string, len(keys))
		for i, k := range keys {
			ids[i] = enqueue(t, q, k)
			require.NoError(t, q.Ack(ctx, lease(t, q, 1)[0]))
		}
		return ids
	}
	t.Run("Records", func(t *testing.T) {
		q := open(t, durable.Retention{Records: 3})
		ids := applyAll(t, q, "k0", "k1", "k2", "k3", "k4")
		for i, id := range ids {
			_, err := q.Status(ctx, id)
			if i < 2 {
				assert.ErrorIs(t, err, durable.ErrNotFound, "record %d was pushed out", i)
			} else {
				assert.NoError(t, err, "record %d is among the 3 newest", i)
			}
			applied, err := q.Applied(ctx, fmt.Sprint("k", i))
			require.NoError(t, err)
			assert.True(t, applied, "the applied key %d is kept", i)
		}
		assert.Equal(t, 3, stored(t, q))
	})
	t.Run("Age", func(t *testing.T) {
		q := open(t, durable.Retention{Age: 50 * time.Millisecond})
		ids := applyAll(t, q, "k0", "k1")
		time.Sleep(100 * time.Millisecond)
		for _, id := range ids {
			_, err := q.Status(ctx, id)
			assert.ErrorIs(t, err, durable.ErrNotFound, "a record older than Age is not reported")
		}
		assert.Equal(t, 2, stored(t, q), "not dropped before the next Ack")
		last := applyAll(t, q, "k2")[0]
		assert.Equal(t, 1, stored(t, q), "the next Ack drops the expired records")
		assert.Equal(t, durable.StateApplied, status(t, q, last).State)
	})
	t.Run("Defaults", func(t *testing.T) {
		q := open(t, durable.Retention{})
		ids := applyAll(t, q, "k0", "k1")
		time.Sleep(10 * time.Millisecond)
		for _, id := range ids {
			assert.Equal(t, durable.StateApplied, status(t, q, id).State)
		}
		assert.Equal(t, 2, stored(t, q))
	})
}
