package durable_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/durable"
	"github.com/bulwark-go/bulwark/durable/queuetest"
)

func TestStoreOutcomes(t *testing.T) {
	queuetest.Outcomes(t, func(t *testing.T, r durable.Retention) durable.Queue {
		s, err := durable.OpenStore(filepath.Join(t.TempDir(), "queue.db"), durable.KeepOutcomes(r))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	}, func(t *testing.T, q durable.Queue) int {
		n, err := durable.OutcomeRecords(q.(*durable.Store))
		require.NoError(t, err)
		return n
	})
}

func TestOpenStoreRetentionErrors(t *testing.T) {
	for field, r := range map[string]durable.Retention{
		"Retention.Age -1s":    {Age: -time.Second},
		"Retention.Records -1": {Records: -1},
	} {
		path := filepath.Join(t.TempDir(), "queue.db")
		_, err := durable.OpenStore(path, durable.KeepOutcomes(r))
		assert.ErrorIs(t, err, durable.ErrInvalidConfig, field)
		assert.ErrorContains(t, err, field)
		_, statErr := os.Stat(path)
		assert.ErrorIs(t, statErr, os.ErrNotExist, "a bad option creates no file")
	}
}

// applyOne enqueues key and acknowledges it, and returns its receipt.
func applyOne(t *testing.T, q durable.Queue, key string) durable.Receipt {
	t.Helper()
	ctx := context.Background()
	id, err := q.Enqueue(ctx, durable.Entry{Key: key, Command: "write"})
	require.NoError(t, err)
	es, err := q.Lease(ctx, time.Now(), 1)
	require.NoError(t, err)
	require.NoError(t, q.Ack(ctx, es[0]))
	return durable.Receipt{Key: key, EntryID: id}
}

// appliedThenClosed applies key in a new queue file, closed before it
// returns, and returns the file's path and the write's receipt.
func appliedThenClosed(t *testing.T, key string) (string, durable.Receipt) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "queue.db")
	s, err := durable.OpenStore(path)
	require.NoError(t, err)
	r := applyOne(t, s, key)
	require.NoError(t, s.Close())
	return path, r
}

// The outcome records are in the file: a Store opened again answers
// applied for a write applied before.
func TestStoreOutcomeSurvivesReopen(t *testing.T) {
	path, r := appliedThenClosed(t, "k")
	st, err := reopen(t, path).Status(context.Background(), r.EntryID)
	require.NoError(t, err)
	assert.Equal(t, durable.StateApplied, st.State)
}
