package durable_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
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

// TestStoreCorruptEntryConformance damages an entry by overwriting its
// stored value with bytes that are not an entry.
func TestStoreCorruptEntryConformance(t *testing.T) {
	queuetest.Corrupt(t, func(t *testing.T) durable.Queue {
		return newReopening(t, filepath.Join(t.TempDir(), "queue.db"))
	}, func(t *testing.T, q durable.Queue, id string) {
		q.(*reopening).rewrite(t, "pending", id, []byte("{not json"))
	})
}

// reopening is a Store that can be closed, changed with bbolt directly and
// opened again, for tests that damage what it holds.
type reopening struct {
	*durable.Store
	path string
}

func newReopening(t *testing.T, path string) *reopening {
	r := &reopening{path: path}
	r.open(t)
	return r
}

// open opens the store, closed when t ends.
func (r *reopening) open(t *testing.T) {
	s, err := durable.OpenStore(r.path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	r.Store = s
}

// rewrite closes the store, sets the value of entry id in bucket to raw,
// and opens the store again.
func (r *reopening) rewrite(t *testing.T, bucket, id string, raw []byte) {
	t.Helper()
	require.NoError(t, r.Store.Close())
	rewrite(t, r.path, bucket, id, raw)
	r.open(t)
}

// rewrite sets the value of entry id (a decimal sequence number) in the
// bucket of the closed queue file at path to raw.
func rewrite(t *testing.T, path, bucket, id string, raw []byte) {
	t.Helper()
	var n uint64
	_, err := fmt.Sscan(id, &n)
	require.NoError(t, err)
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucket)).Put(binary.BigEndian.AppendUint64(nil, n), raw)
	}))
	require.NoError(t, db.Close())
}

// stored returns the raw value of entry id in bucket of the closed queue
// file at path.
func stored(t *testing.T, path, bucket, id string) []byte {
	t.Helper()
	var n uint64
	_, err := fmt.Sscan(id, &n)
	require.NoError(t, err)
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	var raw []byte
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		raw = append(raw, tx.Bucket([]byte(bucket)).Get(binary.BigEndian.AppendUint64(nil, n))...)
		return nil
	}))
	return raw
}

// A stored entry that does not decode is returned for quarantine by Lease
// and DeadLetters, skipped by Stats, and an error naming it and the file
// from the methods that must change it.
func TestStoreCorruptEntry(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "queue.db")
	s, err := durable.OpenStore(path)
	require.NoError(t, err)
	id, err := s.Enqueue(ctx, durable.Entry{Key: "k"})
	require.NoError(t, err)
	_, err = s.Enqueue(ctx, durable.Entry{Key: "k2", EnqueuedAt: time.Unix(1e9, 0)})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	rewrite(t, path, "pending", id, []byte("{"))
	rewrite(t, path, "dead", "7", []byte("{"))

	s, err = durable.OpenStore(path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	es, err := s.Lease(ctx, time.Now(), 10)
	require.NoError(t, err)
	require.Len(t, es, 2)
	assert.Equal(t, durable.ReasonCorrupt, es[0].Reason)
	assert.Equal(t, "k", es[0].Key, "the key is found among the known keys")
	assert.Equal(t, []byte("{"), es[0].Payload, "the raw stored bytes")
	assert.Contains(t, es[0].LastError, path)
	assert.Equal(t, "k2", es[1].Key)
	dead, err := s.DeadLetters(ctx)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	assert.Equal(t, durable.ReasonCorrupt, dead[0].Reason)
	st, err := s.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, st.Depth)
	assert.Equal(t, time.Unix(1e9, 0), st.Oldest.Local(), "the oldest entry that decodes")
	corrupt := func(err error) {
		t.Helper()
		assert.ErrorIs(t, err, durable.ErrCorrupt)
		assert.ErrorContains(t, err, path)
	}
	corrupt(s.Update(ctx, durable.Entry{ID: id, Key: "k", Attempts: 1}))
	corrupt(s.Ack(ctx, durable.Entry{ID: id, Key: "k"}))
	corrupt(s.Requeue(ctx, "7"))
}

// oneEntryFile writes a queue file holding e, closed, and returns its path
// and e's ID.
func oneEntryFile(t *testing.T, e durable.Entry) (path, id string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "queue.db")
	s, err := durable.OpenStore(path)
	require.NoError(t, err)
	id, err = s.Enqueue(context.Background(), e)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	return path, id
}

// reopen opens the queue file at path, closed when t ends.
func reopen(t *testing.T, path string) *durable.Store {
	t.Helper()
	s, err := durable.OpenStore(path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// A byte altered inside a stored entry (its payload, here) is caught by
// the entry's checksum: the entry is quarantined, never replayed with a
// wrong payload.
func TestStoreAlteredPayloadIsNotReplayed(t *testing.T) {
	path, id := oneEntryFile(t, durable.Entry{Key: "k", Payload: []byte(`{"amount":100}`)})
	raw := stored(t, path, "pending", id)
	var e durable.Entry
	require.NoError(t, json.Unmarshal(raw[5:], &e), "a version byte and a CRC-32C, then JSON")
	e.Payload = []byte(`{"amount":900}`)
	altered, err := json.Marshal(e)
	require.NoError(t, err)
	rewrite(t, path, "pending", id, append(raw[:5:5], altered...))

	es, err := reopen(t, path).Lease(context.Background(), time.Now(), 10)
	require.NoError(t, err)
	require.Len(t, es, 1)
	assert.Equal(t, durable.ReasonCorrupt, es[0].Reason)
	assert.Contains(t, es[0].LastError, "checksum")
}

// Entries written before checksums (JSON alone) still read.
func TestStoreReadsEntriesWithoutChecksum(t *testing.T) {
	ctx := context.Background()
	path, id := oneEntryFile(t, durable.Entry{Key: "k", Payload: []byte("p")})
	rewrite(t, path, "pending", id, stored(t, path, "pending", id)[5:])

	s := reopen(t, path)
	es, err := s.Lease(ctx, time.Now(), 10)
	require.NoError(t, err)
	require.Len(t, es, 1)
	assert.Empty(t, es[0].Reason)
	assert.Equal(t, []byte("p"), es[0].Payload)
	require.NoError(t, s.Ack(ctx, es[0]))
}

// damagedFixture writes a queue file with pending, dead and applied
// entries in dir and returns its path and bytes.
func damagedFixture(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(dir, "fixture.db")
	s, err := durable.OpenStore(path)
	require.NoError(t, err)
	payload := make([]byte, 300)
	for i := range 60 {
		id, err := s.Enqueue(ctx, durable.Entry{Key: fmt.Sprint("k", i), Command: "c", Payload: payload})
		require.NoError(t, err)
		switch i % 3 {
		case 1:
			require.NoError(t, s.Ack(ctx, durable.Entry{ID: id, Key: fmt.Sprint("k", i)}))
		case 2:
			require.NoError(t, s.DeadLetter(ctx, durable.Entry{ID: id, Attempts: 3}))
		}
	}
	require.NoError(t, s.Close())
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	return path, raw
}

// exercise opens the damaged file at path and calls every method; it
// reports whether damage was reported. Every error that reports damage
// must name the file; nothing may panic or crash.
func exercise(t *testing.T, path string, opts ...durable.StoreOption) (reported bool) {
	t.Helper()
	ctx := context.Background()
	check := func(err error) {
		t.Helper()
		if err != nil && assert.ErrorIs(t, err, durable.ErrCorrupt) {
			assert.ErrorContains(t, err, path)
			reported = true
		}
	}
	s, err := durable.OpenStore(path, opts...)
	if err != nil {
		check(err)
		return reported
	}
	defer func() { assert.NoError(t, s.Close()) }()
	_, err = s.Stats(ctx)
	check(err)
	es, err := s.Lease(ctx, time.Now(), 1000)
	check(err)
	_, err = s.DeadLetters(ctx)
	check(err)
	_, err = s.Applied(ctx, "k1")
	check(err)
	acked := false
	for _, e := range es {
		switch {
		case e.Reason == durable.ReasonCorrupt:
			check(s.DeadLetter(ctx, e))
			reported = true
		case !acked: // one is enough: each is an fsync
			err := s.Ack(ctx, e)
			assert.NotErrorIs(t, err, durable.ErrNotFound)
			check(err)
			acked = true
		}
	}
	_, err = s.Enqueue(ctx, durable.Entry{Key: "new", Payload: make([]byte, 5000)})
	check(err)
	check(s.Check(ctx))
	return reported
}

// TestStoreDamagedFileNeverPanics opens files truncated at every page
// boundary and files with a byte flipped in every page (in its header and
// at random offsets): bbolt panicked ("assertion failed: Page expected to
// be: 257") or faulted (SIGBUS past the end of a truncated file) in
// OpenStore and Stats; every method must return an error naming the file
// instead, and a truncated file must be refused at open.
func TestStoreDamagedFileNeverPanics(t *testing.T) {
	dir := t.TempDir()
	fixture, good := damagedFixture(t, dir)
	page := os.Getpagesize()
	require.Zero(t, len(good)%page)
	var needed int64
	db, err := bolt.Open(fixture, 0o600, &bolt.Options{ReadOnly: true})
	require.NoError(t, err)
	require.NoError(t, db.View(func(tx *bolt.Tx) error { needed = tx.Size(); return nil }))
	require.NoError(t, db.Close())

	path := filepath.Join(dir, "queue.db")
	t.Run("truncated", func(t *testing.T) {
		for size := 0; int64(size) < needed; size += page / 2 {
			require.NoError(t, os.WriteFile(path, good[:size], 0o600))
			if size == 0 {
				assert.False(t, exercise(t, path), "an empty file is a new queue")
				continue
			}
			assert.True(t, exercise(t, path), "truncated to %d of %d bytes: not refused", size, needed)
		}
	})
	rng := rand.New(rand.NewPCG(1, 2))
	for _, check := range []bool{false, true} {
		t.Run(fmt.Sprint("flipped, check on open ", check), func(t *testing.T) {
			var opts []durable.StoreOption
			if check {
				opts = append(opts, durable.CheckOnOpen())
			}
			reported, variants := 0, 0
			for p := range len(good) / page {
				for _, off := range []int{0, 8, 10, 12, 16, 20, 28, rng.IntN(page), rng.IntN(page)} {
					bad := append([]byte(nil), good...)
					bad[p*page+off] ^= 0xff
					require.NoError(t, os.WriteFile(path, bad, 0o600))
					variants++
					if exercise(t, path, opts...) {
						reported++
					}
				}
			}
			t.Logf("%d of %d files with a flipped byte reported as damaged", reported, variants)
		})
	}
}

// The reported panic: a page whose header names another page ("assertion
// failed: Page expected to be: 257"), hit by Stats. OpenStore refuses such
// a file; damage done while the store is open (the file changed behind
// it) makes Stats, and every call after it, return an error naming the
// file; Close works.
func TestStoreStatsOnMislabelledPageIsAnError(t *testing.T) {
	ctx := context.Background()
	fixture, good := damagedFixture(t, t.TempDir())
	var root int
	db, err := bolt.Open(fixture, 0o600, &bolt.Options{ReadOnly: true})
	require.NoError(t, err)
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		root = int(tx.Bucket([]byte("pending")).Root())
		return nil
	}))
	require.NoError(t, db.Close())
	require.NotZero(t, root, "the pending bucket has pages of its own")
	mislabel := func(f *os.File) {
		t.Helper()
		_, err := f.WriteAt(binary.LittleEndian.AppendUint64(nil, 257), int64(root*os.Getpagesize()))
		require.NoError(t, err)
	}

	bad, err := os.OpenFile(fixture, os.O_RDWR, 0)
	require.NoError(t, err)
	mislabel(bad)
	require.NoError(t, bad.Close())
	_, err = durable.OpenStore(fixture)
	require.ErrorIs(t, err, durable.ErrCorrupt, "refused at open")
	assert.ErrorContains(t, err, fixture)
	assert.ErrorContains(t, err, "says it is page 257")

	require.NoError(t, os.WriteFile(fixture, good, 0o600))
	s, err := durable.OpenStore(fixture)
	require.NoError(t, err)
	behind, err := os.OpenFile(fixture, os.O_RDWR, 0)
	require.NoError(t, err)
	defer behind.Close()
	mislabel(behind)
	_, err = s.Stats(ctx)
	require.ErrorIs(t, err, durable.ErrCorrupt)
	assert.ErrorContains(t, err, fixture)
	assert.ErrorContains(t, err, "Page expected to be")
	_, again := s.Enqueue(ctx, durable.Entry{Key: "after"})
	assert.ErrorIs(t, again, durable.ErrCorrupt, "a damaged file is not written further")
	require.NoError(t, s.Close())
}

// A damaged freelist made bbolt panic inside OpenStore; the error must
// leave the file unlocked, so that it can be opened again once restored.
func TestOpenStoreDamagedFreelistIsAnError(t *testing.T) {
	fixture, good := damagedFixture(t, t.TempDir())
	var freelist int
	db, err := bolt.Open(fixture, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	require.NoError(t, err)
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		for id := 2; ; id++ {
			info, err := tx.Page(id)
			if err != nil || info == nil {
				return fmt.Errorf("no freelist page: %v", err)
			}
			if info.Type == "freelist" {
				freelist = id
				return nil
			}
		}
	}))
	require.NoError(t, db.Close())
	bad := append([]byte(nil), good...)
	clear(bad[freelist*os.Getpagesize() : (freelist+1)*os.Getpagesize()])
	require.NoError(t, os.WriteFile(fixture, bad, 0o600))

	_, err = durable.OpenStore(fixture)
	require.ErrorIs(t, err, durable.ErrCorrupt)
	assert.ErrorContains(t, err, fixture)

	require.NoError(t, os.WriteFile(fixture, good, 0o600))
	s, err := durable.OpenStore(fixture)
	require.NoError(t, err, "the failed open released the file")
	require.NoError(t, s.Check(context.Background()))
	require.NoError(t, s.Close())
}
