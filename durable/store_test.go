package durable_test

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/bulwark-go/bulwark/durable"
	"github.com/bulwark-go/bulwark/durable/queuetest"
)

// openStore opens a new queue file in t's temporary directory, closed when
// t ends.
func openStore(t *testing.T) *durable.Store {
	t.Helper()
	s, err := durable.OpenStore(filepath.Join(t.TempDir(), "queue.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func TestStoreConformance(t *testing.T) {
	queuetest.Run(t, func(t *testing.T) durable.Queue { return openStore(t) })
}

// A stored entry that does not decode is an error naming it, from every
// method that reads it, never a zero Entry or ErrNotFound.
func TestStoreCorruptEntry(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "queue.db")
	s, err := durable.OpenStore(path)
	require.NoError(t, err)
	id, err := s.Enqueue(ctx, durable.Entry{Key: "k"})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	// Overwrite pending entry 1 and add dead entry 2 (the file's buckets,
	// keyed by the ID as a big-endian uint64) with values that are not JSON.
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		k := binary.BigEndian.AppendUint64(nil, 1)
		if err := tx.Bucket([]byte("pending")).Put(k, []byte("{")); err != nil {
			return err
		}
		return tx.Bucket([]byte("dead")).Put(binary.BigEndian.AppendUint64(nil, 2), []byte("{"))
	}))
	require.NoError(t, db.Close())

	s, err = durable.OpenStore(path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	corrupt := func(err error) {
		t.Helper()
		require.Error(t, err)
		assert.NotErrorIs(t, err, durable.ErrNotFound)
		assert.Contains(t, err.Error(), "corrupt entry")
	}
	_, err = s.Lease(ctx, time.Now(), 10)
	corrupt(err)
	_, err = s.DeadLetters(ctx)
	corrupt(err)
	_, err = s.Stats(ctx)
	corrupt(err)
	corrupt(s.Update(ctx, durable.Entry{ID: id, Key: "k", Attempts: 1}))
	corrupt(s.Ack(ctx, durable.Entry{ID: id, Key: "k"}))
	corrupt(s.Requeue(ctx, "2"))
}
