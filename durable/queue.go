package durable

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors of this package and of its Queue implementations; match them with
// errors.Is.
var (
	// ErrInvalidEntry: an entry without an idempotency key, or with one
	// longer than MaxKeyLen.
	ErrInvalidEntry = errors.New("durable: invalid entry")
	// ErrNotFound: no pending (or, for Requeue, dead-lettered) entry has
	// that ID.
	ErrNotFound = errors.New("durable: entry not found")
	// ErrClosed: the queue was closed.
	ErrClosed = errors.New("durable: queue closed")
	// ErrNotAccepted is wrapped by the error of a Write whose work could
	// not be stored (disk full, unwritable file, Redis down): the caller
	// was not told "accepted" and must treat the write as failed.
	ErrNotAccepted = errors.New("durable: write not accepted")
	// ErrInvalidConfig is wrapped by every configuration error of this
	// package; the message names the field and the value.
	ErrInvalidConfig = errors.New("durable: invalid config")
	// ErrCorrupt is wrapped by the error of a queue whose stored data is
	// damaged: a queue file that is truncated or whose pages do not
	// read back (the message names the file), or a Requeue of an entry
	// quarantined as corrupt.
	ErrCorrupt = errors.New("durable: corrupt")
)

// MaxKeyLen is the longest idempotency key a queue accepts, in bytes.
const MaxKeyLen = 512

// Entry is one deferred write. The caller sets Key, Command and Payload;
// the queue sets ID and EnqueuedAt; the Replayer maintains Attempts,
// Deliveries, NotBefore, LastError and Reason.
type Entry struct {
	// ID identifies the entry in its queue (assigned by Enqueue).
	ID string `json:"id"`
	// Key is the idempotency key: the write's request ID, sent with every
	// replay so that a receiver can apply it at most once. Required.
	Key string `json:"key"`
	// Group and Command name the command that deferred the write; the
	// replay runs under the same command name.
	Group   string `json:"group"`
	Command string `json:"command"`
	// Payload is the serialised write.
	Payload []byte `json:"payload"`
	// EnqueuedAt is when the write was accepted (wall clock).
	EnqueuedAt time.Time `json:"enqueued_at"`
	// Attempts counts the replays the dependency answered by refusing
	// this write (see Replayer): the count ReplayerConfig.MaxAttempts
	// bounds. An outage, a replay cut off by a crash and a replay that
	// bulwark itself refused are no attempts.
	Attempts int `json:"attempts"`
	// Deliveries counts the times the write may have reached the
	// receiver: the replays whose Apply began (each is counted before it
	// begins, so one cut off by a crash counts) and the original call if
	// its Run began. It bounds what the receiver saw from above, unless
	// Apply itself sends more than once (net/http's Transport resends a
	// request that has an Idempotency-Key header when a reused connection
	// breaks). A receiver that honours Key applied the write at most once,
	// whatever it says.
	Deliveries int `json:"deliveries"`
	// NotBefore is the earliest time the entry may be replayed (backoff).
	NotBefore time.Time `json:"not_before"`
	// LastError is the error of the last failed replay, or why the entry
	// was dead-lettered.
	LastError string `json:"last_error,omitempty"`
	// Reason says why a dead letter was dead-lettered (ReasonBadRequest,
	// ReasonAttempts, ReasonMaxAge, ReasonCorrupt); empty for a pending
	// entry, except one that Lease returns with ReasonCorrupt: its stored
	// form did not decode (LastError says why, Payload holds the raw
	// stored bytes), and it is to be dead-lettered as it is.
	Reason string `json:"reason,omitempty"`
}

// Reasons of a dead letter (Entry.Reason).
const (
	// ReasonBadRequest: a replay ended as BAD_REQUEST, or the
	// classifier judged its failure Permanent.
	ReasonBadRequest = "bad_request"
	// ReasonAttempts: the dependency refused the write MaxAttempts times.
	ReasonAttempts = "attempts"
	// ReasonMaxAge: outages kept the write from being applied within
	// MaxAge of its acceptance.
	ReasonMaxAge = "max_age"
	// ReasonCorrupt: the stored entry did not decode; it was quarantined
	// so that the entries after it are replayed. It cannot be requeued.
	ReasonCorrupt = "corrupt"
)

// Validate checks what a caller must set: a non-empty Key of at most
// MaxKeyLen bytes, and no negative Deliveries. The error wraps
// ErrInvalidEntry. Every Queue's Enqueue calls it.
func (e Entry) Validate() error {
	switch {
	case e.Deliveries < 0:
		return fmt.Errorf("%w: Deliveries %d is negative", ErrInvalidEntry, e.Deliveries)
	case e.Key == "":
		return fmt.Errorf("%w: empty idempotency key", ErrInvalidEntry)
	case len(e.Key) > MaxKeyLen:
		return fmt.Errorf("%w: idempotency key of %d bytes, max %d", ErrInvalidEntry, len(e.Key), MaxKeyLen)
	}
	return nil
}

// Stats describes a queue at one instant.
type Stats struct {
	// Depth is the number of pending entries (the backlog).
	Depth int
	// Oldest is when the oldest pending entry was enqueued; zero when
	// Depth is 0.
	Oldest time.Time
	// DeadLetters is the number of dead-lettered entries.
	DeadLetters int
	// Resets counts the times this queue value found its backend's state
	// gone and set it up again: for the Redis backend, its consumer group
	// missing because Redis restarted empty or was flushed (the writes
	// the lost state held were lost with it). Always 0 for Store.
	Resets int64
}

// Queue is a durable store of deferred writes. Every method is safe for
// concurrent use. Implementations: Store (an embedded bbolt file) and the
// Redis Streams backend in module github.com/bulwark-go/bulwark/redis
// (package streamqueue); both pass the suite of package queuetest.
//
// Delivery is at least once: an entry leased and replayed may be replayed
// again (after a crash before Ack, or claimed from a consumer that looked
// dead), so a receiver must honour Entry.Key to apply each write once.
type Queue interface {
	// Enqueue stores e and returns its ID; it returns nil only once e is
	// durable (fsync'd, or acknowledged by Redis). An entry whose Key is
	// already pending, dead-lettered or applied is not stored twice: its
	// existing ID is returned, with a nil error (the write was accepted
	// before). An invalid e fails with ErrInvalidEntry. It keeps e's
	// Key, Group, Command, Payload, EnqueuedAt (now if zero) and
	// Deliveries (the original call's, if its Run began), and clears the
	// rest.
	Enqueue(ctx context.Context, e Entry) (string, error)
	// Lease returns up to max pending entries due at now (NotBefore not
	// after now), oldest first, for one consumer to replay. A stored entry
	// that does not decode is returned with Reason ReasonCorrupt (see
	// Entry), never as an error that would stop the queue.
	Lease(ctx context.Context, now time.Time, max int) ([]Entry, error)
	// Update stores e's Attempts, Deliveries, NotBefore and LastError on
	// the pending entry e.ID, durably. It fails with ErrNotFound if there
	// is none, or, in a queue shared by consumers, if this one no longer
	// holds it (another claimed it since its Lease).
	Update(ctx context.Context, e Entry) error
	// Ack records e.Key as applied, writes the outcome record of e.ID (see
	// Retention) and removes the pending entry e.ID, in one atomic step.
	// Acknowledging an entry already acknowledged is a no-op; an unknown
	// one fails with ErrNotFound.
	Ack(ctx context.Context, e Entry) error
	// Applied reports whether an entry with this key was acknowledged.
	Applied(ctx context.Context, key string) (bool, error)
	// Status reports what the queue knows of the write whose ID is id
	// (the ID Enqueue returned): accepted (pending), dead-lettered, or
	// applied, from the outcome record Ack wrote (see Retention). It
	// fails with ErrNotFound if the queue holds no record of id: an ID it
	// never issued, or one whose outcome record expired or was pushed out
	// (or, for Redis, whose state Redis lost). It never reports applied a
	// write that Ack did not record.
	Status(ctx context.Context, id string) (Status, error)
	// DeadLetter moves the pending entry e.ID to the dead letters, with
	// e's Attempts, Deliveries, LastError and Reason. A pending entry
	// whose stored form does not decode is moved too, as e describes it.
	DeadLetter(ctx context.Context, e Entry) error
	// DeadLetters lists the dead-lettered entries, oldest first.
	DeadLetters(ctx context.Context) ([]Entry, error)
	// Requeue moves dead-lettered entry id back to the pending entries
	// with no attempts and no backoff, its Deliveries kept (ErrNotFound
	// if there is none; ErrCorrupt for one dead-lettered as corrupt).
	Requeue(ctx context.Context, id string) error
	// Stats returns the backlog depth, the oldest entry's time and the
	// dead-letter count.
	Stats(ctx context.Context) (Stats, error)
	// Close releases the queue's resources; later calls fail with
	// ErrClosed.
	Close() error
}
