package durable

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Store is the embedded Queue: one bbolt file, no server. Every change is
// committed with an fsync before the method returns, so an entry Enqueue
// accepted survives a crash of the process or of the machine. The file is
// locked by the process that opens it: one process replays a Store. It is
// safe for concurrent use.
//
// Idempotency keys of acknowledged entries are kept (so that a retried
// request already applied is not queued again); they are never pruned.
// The outcome records that Status reads after Ack are bounded by a
// Retention (KeepOutcomes; default 24 h and 100,000 records).
//
// # Damage
//
// A damaged file never crashes the process. OpenStore reads the file
// first, with bounds checks (bbolt has none: a damaged page makes it
// panic, fault, or read memory outside the file), and refuses one shorter
// than its own pages say (truncated) and one with a page, an element or a
// page id out of place, with an error wrapping ErrCorrupt that names the
// file; with CheckOnOpen it also runs Check. Every method recovers a fault
// or a panic of bbolt on a page damaged after the open and returns such
// an error too; from then on the Store refuses every call with it (a
// damaged file must not be written further) until it is closed: restore
// the file from a backup, or move it aside.
//
// Each entry is stored with a CRC-32C checksum: an entry whose bytes were
// altered is not replayed with a wrong payload but returned by Lease with
// Reason ReasonCorrupt, to be quarantined in the dead letters (see
// Replayer), while the entries after it go on.
type Store struct {
	db     *bolt.DB
	path   string
	keep   Retention
	mu     sync.RWMutex // guards closed against a concurrent Close
	closed bool
	broken atomic.Pointer[error] // the damage found, once found
}

// Buckets of the file.
var (
	bucketPending = []byte("pending") // id → entry (encodeRecord)
	bucketDead    = []byte("dead")    // id → entry (encodeRecord)
	bucketKeys    = []byte("keys")    // key → id, of pending and dead entries
	bucketApplied = []byte("applied") // key → id, of acknowledged entries
	bucketOutcome = []byte("outcome") // id → outcome record (encodeRecord of an outcome), of acknowledged entries
	bucketOrder   = []byte("order")   // ack sequence → applied time (8 bytes) and id, of the outcome records
)

// StoreOption adjusts OpenStore. Build it with CheckOnOpen or
// KeepOutcomes; it is a small value.
type StoreOption struct {
	check bool
	keep  *Retention
}

// CheckOnOpen makes OpenStore run Check too before it returns, and fail
// (with the file closed) if Check finds damage. It reads every page of the
// file once more and maps them all: its cost grows with the file's size,
// which the applied keys (never pruned) make grow with every write ever
// acknowledged.
func CheckOnOpen() StoreOption { return StoreOption{check: true} }

// KeepOutcomes sets the bound of the outcome records the Store keeps for
// Status (zero fields: the defaults). A smaller bound than the file's
// records takes effect at the next Ack, which drops the records past it.
func KeepOutcomes(r Retention) StoreOption { return StoreOption{keep: &r} }

// OpenStore opens (or creates) the queue file at path. It fails if the
// file cannot be created or written, if another process holds it for
// longer than a second, or, with an error wrapping ErrCorrupt, if the file
// is damaged (see Store). It reads the whole file once, checking every
// page that bbolt will read, so its cost grows with the file's size.
//
// A Retention with a negative field is an error wrapping ErrInvalidConfig,
// before the file is opened.
func OpenStore(path string, opts ...StoreOption) (*Store, error) {
	var keep Retention
	for _, o := range opts {
		if o.keep != nil {
			keep = *o.keep
		}
	}
	if err := keep.Validate(); err != nil {
		return nil, err
	}
	db, err := openBolt(path)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, path: path, keep: keep.WithDefaults()}
	if err := s.initialise(slices.ContainsFunc(opts, func(o StoreOption) bool { return o.check })); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// initialise creates the buckets, and runs Check if check is set.
func (s *Store) initialise(check bool) error {
	ctx := context.Background()
	err := s.update(ctx, func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketPending, bucketDead, bucketKeys, bucketApplied, bucketOutcome, bucketOrder} {
			_, err := tx.CreateBucketIfNotExists(b)
			if errors.Is(err, berrors.ErrIncompatibleValue) {
				return damaged(s.path, fmt.Sprintf("its bucket %s is not a bucket", b))
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && check {
		err = s.Check(ctx)
	}
	if err != nil && !errors.Is(err, ErrCorrupt) {
		err = fmt.Errorf("durable: initialise queue file %s: %w", s.path, err)
	}
	return err
}

// openBolt opens the bbolt file at path, after verifyFile found it sound
// (with the file locked, so that no other process changes it meanwhile).
// Should bbolt still panic or fault while it opens the file (it reads the
// freelist), openBolt turns this into an error, and unlocks and closes the
// file; the file's memory mapping then stays until the process ends, as
// bbolt's half-opened DB cannot be reached to unmap it.
func openBolt(path string) (db *bolt.DB, err error) {
	var file *os.File
	open := func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		if err != nil {
			return nil, err
		}
		if err := lockFile(f, lockTimeout); err != nil {
			_ = f.Close()
			return nil, err
		}
		fi, err := f.Stat()
		if err == nil && fi.Size() > 0 {
			if verr := verifyFile(f, fi.Size()); verr != nil {
				err = damaged(path, verr.Error())
			}
		}
		if err != nil {
			unlockFile(f)
			_ = f.Close()
			return nil, err
		}
		file = f
		return f, nil
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if file != nil {
				unlockFile(file)
				_ = file.Close()
			}
			db, err = nil, damage(path, p)
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout, OpenFile: open})
	if err != nil && !errors.Is(err, ErrCorrupt) {
		err = fmt.Errorf("durable: open queue file %s: %w", path, err)
	}
	return db, err
}

// lockTimeout is how long OpenStore waits for another process to release
// the file.
const lockTimeout = time.Second

// damage returns the error of a fault or panic p while reading file path.
func damage(path string, p any) error {
	return damaged(path, fmt.Sprint(p))
}

// damaged returns the error of a damaged file path, as what says.
func damaged(path, what string) error {
	return fmt.Errorf("%w: queue file %s is %w (%s): restore it from a backup or move it aside", ErrCorrupt, path, errDamaged, what)
}

// Path returns the queue file's path.
func (s *Store) Path() string { return s.path }

// Check reads every page of the file and runs bbolt's consistency check
// (every page reachable or free, none twice); it returns an error wrapping
// ErrCorrupt, naming the file, for the first problems found. It reads the
// whole file: see CheckOnOpen.
func (s *Store) Check(ctx context.Context) error {
	return s.view(ctx, func(tx *bolt.Tx) error {
		// Read every page here first (tx.Check reads the same ones): a
		// fault on a damaged page then happens on this goroutine, which
		// recovers it, and not on the one tx.Check starts, where it would
		// crash the process.
		if err := tx.ForEach(func(name []byte, b *bolt.Bucket) error { return s.walk(name, b) }); err != nil {
			return err
		}
		var found []error
		for err := range tx.Check() {
			if len(found) < 3 {
				found = append(found, err)
			}
		}
		if len(found) > 0 {
			return damaged(s.path, "its consistency check fails: "+errors.Join(found...).Error())
		}
		return nil
	})
}

// walk reads every page of bucket b, named name. The file's buckets hold
// entries and keys, never buckets: one found inside is damage.
func (s *Store) walk(name []byte, b *bolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v != nil {
			return nil
		}
		if child := b.Bucket(k); child != nil {
			if err := s.walk(k, child); err != nil {
				return err
			}
		}
		return damaged(s.path, fmt.Sprintf("bucket %q holds a bucket at key %x", name, k))
	})
}

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
// read-only one. It returns ctx's error if ctx has ended, ErrClosed if the
// store is closed and the damage found if it is damaged, without beginning
// one; the read lock keeps Close out until the transaction ends. It is the
// boundary where a fault or a panic on a damaged page becomes the error
// every later call returns. It calls the file's Update and View directly
// (not through a func value) so that the callers' fn need not escape to
// the heap.
func (s *Store) inTx(ctx context.Context, writable bool, fn func(tx *bolt.Tx) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if broken := s.broken.Load(); broken != nil {
		return *broken
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = s.fail(damage(s.path, p))
		}
	}()
	if writable {
		err = s.db.Update(fn)
	} else {
		err = s.db.View(fn)
	}
	if errors.Is(err, errDamaged) {
		err = s.fail(err)
	}
	return err
}

// errDamaged marks an error about the file's structure (not about one
// entry), which makes the Store refuse every later call.
var errDamaged = errors.New("damaged")

// fail records err as the damage found, unless one was recorded already,
// and returns the one recorded.
func (s *Store) fail(err error) error {
	s.broken.CompareAndSwap(nil, &err)
	return *s.broken.Load()
}

// seqKey encodes sequence number n, an entry's ID, as a bucket key, which
// sorts in enqueue order.
func seqKey(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// idOf returns the ID of the entry at bucket key k: its sequence number,
// or for a key this package never writes (a damaged file), "x" and the
// key in hex, so that even such an entry can be moved aside.
func idOf(k []byte) string {
	if len(k) == 8 {
		return strconv.FormatUint(binary.BigEndian.Uint64(k), 10)
	}
	return "x" + hex.EncodeToString(k)
}

// idKey encodes an ID (see idOf) as a bucket key.
func idKey(id string) ([]byte, error) {
	if h, ok := strings.CutPrefix(id, "x"); ok {
		if k, err := hex.DecodeString(h); err == nil && len(k) > 0 {
			return k, nil
		}
	} else if n, err := strconv.ParseUint(id, 10, 64); err == nil {
		return seqKey(n), nil
	}
	return nil, fmt.Errorf("%w: id %q", ErrNotFound, id)
}

// An entry (and an outcome record) is stored as a version byte, the
// CRC-32C of the JSON that follows (big-endian), and the JSON. A value
// that begins with '{' is an entry written before checksums, JSON alone.
const entryV1 = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeRecord returns the stored form of v, an Entry or an outcome.
func encodeRecord(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 5, 5+len(raw))
	out[0] = entryV1
	binary.BigEndian.PutUint32(out[1:], crc32.Checksum(raw, castagnoli))
	return append(out, raw...), nil
}

// decodeRecord decodes raw, the value stored at key k, into v; what names
// the kind of record for the error.
func (s *Store) decodeRecord(what string, k, raw []byte, v any) error {
	js := raw
	switch {
	case len(raw) > 0 && raw[0] == '{':
	case len(raw) >= 5 && raw[0] == entryV1:
		js = raw[5:]
		if crc32.Checksum(js, castagnoli) != binary.BigEndian.Uint32(raw[1:]) {
			return fmt.Errorf("%w %s %s in queue file %s: checksum mismatch", ErrCorrupt, what, idOf(k), s.path)
		}
	default:
		return fmt.Errorf("%w %s %s in queue file %s: unknown format", ErrCorrupt, what, idOf(k), s.path)
	}
	if err := json.Unmarshal(js, v); err != nil {
		return fmt.Errorf("%w %s %s in queue file %s: %w", ErrCorrupt, what, idOf(k), s.path, err)
	}
	return nil
}

// decodeEntry decodes raw, the value stored at key k. The entry's ID is
// the key's, whatever the JSON says.
func (s *Store) decodeEntry(k, raw []byte) (Entry, error) {
	var e Entry
	if err := s.decodeRecord("entry", k, raw, &e); err != nil {
		return Entry{}, err
	}
	e.ID = idOf(k)
	return e, nil
}

// readEntry decodes the value raw at key k of tx's bucket name. An entry
// that does not decode comes back as the quarantine form Lease returns
// (see Entry.Reason), its key looked up among the known keys.
func (s *Store) readEntry(tx *bolt.Tx, k, raw []byte) Entry {
	e, err := s.decodeEntry(k, raw)
	if err == nil {
		return e
	}
	id := idOf(k)
	e = Entry{ID: id, Payload: bytes.Clone(raw), LastError: err.Error(), Reason: ReasonCorrupt}
	_ = tx.Bucket(bucketKeys).ForEach(func(key, v []byte) error {
		if string(v) == id {
			e.Key = string(key)
			return errFound
		}
		return nil
	})
	return e
}

// errFound stops a ForEach that found what it looked for.
var errFound = errors.New("found")

func putEntry(b *bolt.Bucket, k []byte, e Entry) error {
	raw, err := encodeRecord(e)
	if err != nil {
		return err
	}
	return b.Put(k, raw)
}

// Enqueue implements Queue. It keeps e.Deliveries (the original call's,
// if its Run began) and clears Attempts, NotBefore, LastError and Reason.
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
		e.ID, e.Attempts, e.NotBefore, e.LastError, e.Reason = id, 0, time.Time{}, "", ""
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
// the due ones. An entry that does not decode is always due.
func (s *Store) Lease(ctx context.Context, now time.Time, max int) ([]Entry, error) {
	var out []Entry
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketPending).Cursor()
		for k, raw := c.First(); k != nil && len(out) < max; k, raw = c.Next() {
			if raw == nil {
				continue // a bucket, not an entry: damage that Check reports
			}
			if e := s.readEntry(tx, k, raw); !e.NotBefore.After(now) {
				out = append(out, e)
			}
		}
		return nil
	})
	return out, err
}

// Update implements Queue.
func (s *Store) Update(ctx context.Context, e Entry) error {
	return s.withEntry(ctx, e.ID, bucketPending, nil, func(tx *bolt.Tx, b *bolt.Bucket, k []byte, old Entry, err error) error {
		if err != nil {
			return err
		}
		old.Attempts, old.Deliveries, old.NotBefore, old.LastError = e.Attempts, e.Deliveries, e.NotBefore, e.LastError
		return putEntry(b, k, old)
	})
}

// Ack implements Queue. Acking an entry that was acked already (its key is
// applied with this ID) succeeds and changes nothing. The outcome record
// keeps the entry's Key, Group, Command, EnqueuedAt, Attempts and
// Deliveries as stored, and the time of the Ack.
func (s *Store) Ack(ctx context.Context, e Entry) error {
	acked := func(tx *bolt.Tx) bool {
		id := tx.Bucket(bucketApplied).Get([]byte(e.Key))
		return id != nil && string(id) == e.ID
	}
	return s.withEntry(ctx, e.ID, bucketPending, acked, func(tx *bolt.Tx, b *bolt.Bucket, k []byte, old Entry, err error) error {
		if err != nil {
			return err
		}
		key := []byte(old.Key)
		if err := tx.Bucket(bucketApplied).Put(key, []byte(e.ID)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketKeys).Delete(key); err != nil {
			return err
		}
		if err := b.Delete(k); err != nil {
			return err
		}
		return s.recordOutcome(tx, k, old, time.Now())
	})
}

// outcome is the record Ack keeps of an applied entry, for Status.
type outcome struct {
	Key        string    `json:"key"`
	Group      string    `json:"group,omitempty"`
	Command    string    `json:"command,omitempty"`
	EnqueuedAt time.Time `json:"enqueued_at"`
	Attempts   int       `json:"attempts,omitzero"`
	Deliveries int       `json:"deliveries,omitzero"`
	AppliedAt  time.Time `json:"applied_at"`
}

// recordOutcome stores the outcome record of entry e, at key k, applied
// at now, then drops the oldest records while they are more than
// Retention.Records or older than Retention.Age. The order bucket lists
// the records in the order of their Acks, under consecutive sequence
// numbers, so that the count is its last number minus its first, plus 1.
// A listing that does not decode (a damaged file) is dropped.
func (s *Store) recordOutcome(tx *bolt.Tx, k []byte, e Entry, now time.Time) error {
	raw, err := encodeRecord(outcome{Key: e.Key, Group: e.Group, Command: e.Command, EnqueuedAt: e.EnqueuedAt,
		Attempts: e.Attempts, Deliveries: e.Deliveries, AppliedAt: now})
	if err != nil {
		return err
	}
	records, order := tx.Bucket(bucketOutcome), tx.Bucket(bucketOrder)
	if err := records.Put(k, raw); err != nil {
		return err
	}
	last, err := order.NextSequence()
	if err != nil {
		return err
	}
	if err := order.Put(seqKey(last), append(binary.BigEndian.AppendUint64(nil, uint64(now.UnixNano())), k...)); err != nil {
		return err
	}
	c := order.Cursor()
	for ok, v := c.First(); ok != nil; ok, v = c.First() {
		if len(ok) == 8 && len(v) > 8 {
			count := last - binary.BigEndian.Uint64(ok) + 1
			at := time.Unix(0, int64(binary.BigEndian.Uint64(v)))
			if count <= uint64(s.keep.Records) && !s.keep.Expired(at, now) {
				return nil
			}
			if err := records.Delete(v[8:]); err != nil {
				return err
			}
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// Status implements Queue. An entry pending or dead-lettered whose stored
// form does not decode is reported in the quarantine form Lease returns
// (see Entry.Reason); an outcome record that does not decode is an error
// wrapping ErrCorrupt that names it and the file.
func (s *Store) Status(ctx context.Context, id string) (Status, error) {
	k, err := idKey(id)
	if err != nil {
		return Status{}, err
	}
	var st Status
	err = s.view(ctx, func(tx *bolt.Tx) error {
		if raw := tx.Bucket(bucketPending).Get(k); raw != nil {
			st = Status{State: StateAccepted, Entry: s.readEntry(tx, k, raw)}
			return nil
		}
		if raw := tx.Bucket(bucketDead).Get(k); raw != nil {
			st = Status{State: StateDeadLettered, Entry: s.readEntry(tx, k, raw)}
			return nil
		}
		raw := tx.Bucket(bucketOutcome).Get(k)
		if raw == nil {
			return fmt.Errorf("%w: id %s", ErrNotFound, id)
		}
		var o outcome
		if err := s.decodeRecord("outcome record", k, raw, &o); err != nil {
			return err
		}
		if s.keep.Expired(o.AppliedAt, time.Now()) {
			return fmt.Errorf("%w: id %s: its outcome record expired", ErrNotFound, id)
		}
		st = Status{State: StateApplied, AppliedAt: o.AppliedAt, Entry: Entry{ID: idOf(k), Key: o.Key, Group: o.Group,
			Command: o.Command, EnqueuedAt: o.EnqueuedAt, Attempts: o.Attempts, Deliveries: o.Deliveries}}
		return nil
	})
	return st, err
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

// DeadLetter implements Queue. A pending entry that does not decode is
// stored as e describes it (the quarantine form Lease returned).
func (s *Store) DeadLetter(ctx context.Context, e Entry) error {
	return s.withEntry(ctx, e.ID, bucketPending, nil, func(tx *bolt.Tx, src *bolt.Bucket, k []byte, old Entry, err error) error {
		if err != nil {
			old = e
		}
		old.Attempts, old.Deliveries, old.LastError, old.Reason = e.Attempts, e.Deliveries, e.LastError, e.Reason
		return move(tx, src, bucketDead, k, old)
	})
}

// Requeue implements Queue.
func (s *Store) Requeue(ctx context.Context, id string) error {
	return s.withEntry(ctx, id, bucketDead, nil, func(tx *bolt.Tx, src *bolt.Bucket, k []byte, old Entry, err error) error {
		if err == nil && old.Reason == ReasonCorrupt {
			err = fmt.Errorf("%w: entry %s in queue file %s was quarantined as corrupt: %s", ErrCorrupt, id, s.path, old.LastError)
		}
		if err != nil {
			return err
		}
		old.Attempts, old.NotBefore, old.LastError, old.Reason = 0, time.Time{}, "", ""
		return move(tx, src, bucketPending, k, old)
	})
}

// move moves e, at key k of bucket src, to bucket to.
func move(tx *bolt.Tx, src *bolt.Bucket, to, k []byte, e Entry) error {
	if err := src.Delete(k); err != nil {
		return err
	}
	return putEntry(tx.Bucket(to), k, e)
}

// withEntry runs fn in one write transaction on the entry id of bucket
// name (b, its key k and its value e, or the error that says why the value
// does not decode). Without such an entry it returns an error wrapping
// ErrNotFound, unless done reports that the work is done already (then
// nil).
func (s *Store) withEntry(ctx context.Context, id string, name []byte, done func(*bolt.Tx) bool,
	fn func(tx *bolt.Tx, b *bolt.Bucket, k []byte, e Entry, err error) error) error {
	k, err := idKey(id)
	if err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(name)
		if raw := b.Get(k); raw != nil {
			e, err := s.decodeEntry(k, raw)
			return fn(tx, b, k, e, err)
		}
		if done != nil && done(tx) {
			return nil
		}
		if listed(b, k) {
			return damaged(s.path, fmt.Sprintf("bucket %s lists id %s, which its index does not find", name, id))
		}
		return fmt.Errorf("%w: %s id %s", ErrNotFound, name, id)
	})
}

// listed reports whether a scan of bucket b meets key k: after Get missed
// it, only in a file whose pages are out of order.
func listed(b *bolt.Bucket, k []byte) bool {
	c := b.Cursor()
	for ck, _ := c.First(); ck != nil; ck, _ = c.Next() {
		if bytes.Equal(ck, k) {
			return true
		}
	}
	return false
}

// DeadLetters implements Queue. A dead letter that does not decode is
// listed in the quarantine form Lease returns (see Entry.Reason).
func (s *Store) DeadLetters(ctx context.Context) ([]Entry, error) {
	var out []Entry
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketDead).ForEach(func(k, raw []byte) error {
			out = append(out, s.readEntry(tx, k, raw))
			return nil
		})
	})
	return out, err
}

// Stats implements Queue. Oldest is the enqueue time of the first pending
// entry that decodes.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := s.view(ctx, func(tx *bolt.Tx) error {
		pending := tx.Bucket(bucketPending)
		st.Depth = pending.Stats().KeyN
		st.DeadLetters = tx.Bucket(bucketDead).Stats().KeyN
		c := pending.Cursor()
		for k, raw := c.First(); k != nil; k, raw = c.Next() {
			if e, err := s.decodeEntry(k, raw); err == nil {
				st.Oldest = e.EnqueuedAt
				break
			}
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
