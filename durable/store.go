package durable

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Store is the embedded Queue: one bbolt file, no server. Every change is
// committed with an fsync before the method returns, so an entry Enqueue
// accepted survives a crash of the process or of the machine. The file is
// locked by the process that opens it: one process replays a Store. It is
// safe for concurrent use.
//
// Idempotency keys of acknowledged entries are kept (so that a retried
// request already applied is not queued again); they are never pruned.
type Store struct {
	db     *bolt.DB
	mu     sync.RWMutex // guards closed against a concurrent Close
	closed bool
}

// Buckets of the file.
var (
	bucketPending = []byte("pending") // id → entry (JSON)
	bucketDead    = []byte("dead")    // id → entry (JSON)
	bucketKeys    = []byte("keys")    // key → id, of pending and dead entries
	bucketApplied = []byte("applied") // key → id, of acknowledged entries
)

// OpenStore opens (or creates) the queue file at path. It fails if the
// file cannot be created or written, or if another process holds it for
// longer than a second.
func OpenStore(path string) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("durable: open queue file %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketPending, bucketDead, bucketKeys, bucketApplied} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("durable: initialise queue file %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Path returns the queue file's path.
func (s *Store) Path() string { return s.db.Path() }

// update runs fn in a read-write transaction, committed (and fsync'd) when
// fn returns nil.
func (s *Store) update(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	return s.inTx(ctx, true, fn)
}

// view runs fn in a read-only transaction.
func (s *Store) view(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	return s.inTx(ctx, false, fn)
}

// inTx runs fn in a read-write transaction if writable, else in a
// read-only one. It returns ctx's error if ctx has ended and ErrClosed if
// the store is closed, without beginning one; the read lock keeps Close
// out until the transaction ends. It calls the file's Update and View
// directly (not through a func value) so that the callers' fn need not
// escape to the heap.
func (s *Store) inTx(ctx context.Context, writable bool, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if writable {
		return s.db.Update(fn)
	}
	return s.db.View(fn)
}

// seqKey encodes sequence number n, an entry's ID, as a bucket key, which
// sorts in enqueue order.
func seqKey(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// idKey encodes an ID (a decimal sequence number) as a bucket key.
func idKey(id string) ([]byte, error) {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: id %q", ErrNotFound, id)
	}
	return seqKey(n), nil
}

// decodeEntry decodes raw, the value stored at key k.
func decodeEntry(k, raw []byte) (Entry, error) {
	var e Entry
	if err := json.Unmarshal(raw, &e); err != nil {
		return Entry{}, fmt.Errorf("durable: corrupt entry %x: %w", k, err)
	}
	return e, nil
}

func putEntry(b *bolt.Bucket, k []byte, e Entry) error {
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return b.Put(k, raw)
}

// Enqueue implements Queue.
func (s *Store) Enqueue(ctx context.Context, e Entry) (string, error) {
	if err := e.Validate(); err != nil {
		return "", err
	}
	var id string
	err := s.update(ctx, func(tx *bolt.Tx) error {
		key := []byte(e.Key)
		for _, known := range [][]byte{bucketKeys, bucketApplied} { // pending or dead, then applied
			if old := tx.Bucket(known).Get(key); old != nil {
				id = string(old)
				return nil
			}
		}
		pending := tx.Bucket(bucketPending)
		n, err := pending.NextSequence()
		if err != nil {
			return err
		}
		id = strconv.FormatUint(n, 10)
		e.ID, e.Attempts, e.NotBefore, e.LastError = id, 0, time.Time{}, ""
		if e.EnqueuedAt.IsZero() {
			e.EnqueuedAt = time.Now()
		}
		if err := tx.Bucket(bucketKeys).Put(key, []byte(id)); err != nil {
			return err
		}
		return putEntry(pending, seqKey(n), e)
	})
	if err != nil {
		return "", fmt.Errorf("durable: enqueue %q: %w", e.Key, err)
	}
	return id, nil
}

// Lease implements Queue. It scans the pending entries in order, skipping
// those not yet due: its cost grows with the entries in backoff ahead of
// the due ones.
func (s *Store) Lease(ctx context.Context, now time.Time, max int) ([]Entry, error) {
	var out []Entry
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketPending).Cursor()
		for k, raw := c.First(); k != nil && len(out) < max; k, raw = c.Next() {
			e, err := decodeEntry(k, raw)
			if err != nil {
				return err
			}
			if !e.NotBefore.After(now) {
				out = append(out, e)
			}
		}
		return nil
	})
	return out, err
}

// Update implements Queue.
func (s *Store) Update(ctx context.Context, e Entry) error {
	return s.withEntry(ctx, e.ID, bucketPending, nil, func(tx *bolt.Tx, b *bolt.Bucket, k []byte, old Entry) error {
		old.Attempts, old.NotBefore, old.LastError = e.Attempts, e.NotBefore, e.LastError
		return putEntry(b, k, old)
	})
}

// Ack implements Queue. Acking an entry that was acked already (its key is
// applied with this ID) succeeds.
func (s *Store) Ack(ctx context.Context, e Entry) error {
	acked := func(tx *bolt.Tx) bool {
		id := tx.Bucket(bucketApplied).Get([]byte(e.Key))
		return id != nil && string(id) == e.ID
	}
	return s.withEntry(ctx, e.ID, bucketPending, acked, func(tx *bolt.Tx, b *bolt.Bucket, k []byte, old Entry) error {
		key := []byte(old.Key)
		if err := tx.Bucket(bucketApplied).Put(key, []byte(e.ID)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketKeys).Delete(key); err != nil {
			return err
		}
		return b.Delete(k)
	})
}

// Applied implements Queue.
func (s *Store) Applied(ctx context.Context, key string) (bool, error) {
	var ok bool
	err := s.view(ctx, func(tx *bolt.Tx) error {
		ok = tx.Bucket(bucketApplied).Get([]byte(key)) != nil
		return nil
	})
	return ok, err
}

// DeadLetter implements Queue.
func (s *Store) DeadLetter(ctx context.Context, e Entry) error {
	return s.move(ctx, e.ID, bucketPending, bucketDead, func(old *Entry) {
		old.Attempts, old.LastError = e.Attempts, e.LastError
	})
}

// Requeue implements Queue.
func (s *Store) Requeue(ctx context.Context, id string) error {
	return s.move(ctx, id, bucketDead, bucketPending, func(old *Entry) {
		old.Attempts, old.NotBefore = 0, time.Time{}
	})
}

// move moves entry id from bucket from to bucket to, changed by edit.
func (s *Store) move(ctx context.Context, id string, from, to []byte, edit func(*Entry)) error {
	return s.withEntry(ctx, id, from, nil, func(tx *bolt.Tx, src *bolt.Bucket, k []byte, e Entry) error {
		edit(&e)
		if err := src.Delete(k); err != nil {
			return err
		}
		return putEntry(tx.Bucket(to), k, e)
	})
}

// withEntry runs fn in one write transaction on the entry id of bucket
// name (b, its key k and its value e). Without such an entry it returns an
// error wrapping ErrNotFound, unless done reports that the work is done
// already (then nil).
func (s *Store) withEntry(ctx context.Context, id string, name []byte, done func(*bolt.Tx) bool,
	fn func(tx *bolt.Tx, b *bolt.Bucket, k []byte, e Entry) error) error {
	k, err := idKey(id)
	if err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(name)
		if raw := b.Get(k); raw != nil {
			e, err := decodeEntry(k, raw)
			if err != nil {
				return err
			}
			return fn(tx, b, k, e)
		}
		if done != nil && done(tx) {
			return nil
		}
		return fmt.Errorf("%w: %s id %s", ErrNotFound, name, id)
	})
}

// DeadLetters implements Queue.
func (s *Store) DeadLetters(ctx context.Context) ([]Entry, error) {
	var out []Entry
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketDead).ForEach(func(k, raw []byte) error {
			e, err := decodeEntry(k, raw)
			if err != nil {
				return err
			}
			out = append(out, e)
			return nil
		})
	})
	return out, err
}

// Stats implements Queue.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := s.view(ctx, func(tx *bolt.Tx) error {
		pending := tx.Bucket(bucketPending)
		st.Depth = pending.Stats().KeyN
		st.DeadLetters = tx.Bucket(bucketDead).Stats().KeyN
		if k, raw := pending.Cursor().First(); k != nil {
			e, err := decodeEntry(k, raw)
			st.Oldest = e.EnqueuedAt
			return err
		}
		return nil
	})
	return st, err
}

// Close implements Queue: it closes the file.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.db.Close()
}
