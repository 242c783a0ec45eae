package durable

import (
	"fmt"
	"time"
)

// State is where a deferred write is, as Queue.Status reports it.
type State string

// States of a deferred write.
const (
	// StateAccepted: the write is stored and not applied yet; it waits
	// for a replay (Entry.NotBefore says when it is due).
	StateAccepted State = "accepted"
	// StateApplied: a replay applied the write and the queue recorded it
	// (Ack). Only a record written by Ack says so: a queue never reports
	// a write applied that it did not acknowledge.
	StateApplied State = "applied"
	// StateDeadLettered: the write was dead-lettered (Entry.Reason says
	// why); an operator may requeue it, which makes it accepted again.
	StateDeadLettered State = "dead_lettered"
)

// Status is what a queue knows of one deferred write (Queue.Status).
type Status struct {
	// State is accepted, applied or dead_lettered.
	State State
	// Entry is the write as the queue holds it: its Key, Group, Command,
	// EnqueuedAt, Attempts and Deliveries; for an accepted write also its
	// NotBefore and LastError, for a dead letter its LastError and
	// Reason. The outcome record of an applied write keeps no Payload.
	// Entry.ID is the write's ID now, which differs from the one asked
	// for after the Redis backend requeued a dead letter under a new ID.
	Entry Entry
	// AppliedAt is when the write was acknowledged; zero unless applied.
	AppliedAt time.Time
}

// Defaults of Retention.
const (
	DefaultRetentionAge     = 24 * time.Hour
	DefaultRetentionRecords = 100_000
)

// Retention bounds the outcome records a queue keeps, so that Status can
// still answer "applied" once Ack removed the entry: Ack writes one record
// per write, in the same atomic step in which it records the key as
// applied, and drops the records past the bound, oldest first. A record
// is kept for Age after its write was applied, and at most Records of
// them are kept: past either, Status no longer knows the write (it fails
// with ErrNotFound) and a StatusHandler answers 410 Gone, never
// "applied". A record holds the write's key, group, command, times of
// acceptance and Ack, attempts and deliveries, and is listed in the order
// of the Acks: the bound holds the records' storage to Records of them.
// The idempotency keys of applied writes (Queue.Applied) are a separate
// set, not bounded by Retention. The Redis backend also writes a record
// when it requeues a dead letter (under a new ID), which names the new ID
// so that Status of the old one follows the write, under the same bound.
//
// Zero fields take the defaults (24 h, 100,000 records): a client that
// polls its token within a day of the write's replay learns its outcome,
// unless more than 100,000 writes were applied since.
type Retention struct {
	// Age is how long an outcome record is kept after its write was
	// applied (default 24 h).
	Age time.Duration
	// Records is how many outcome records are kept at most (default
	// 100,000).
	Records int
}

// WithDefaults returns r with its zero fields set to the defaults.
func (r Retention) WithDefaults() Retention {
	if r.Age == 0 {
		r.Age = DefaultRetentionAge
	}
	if r.Records == 0 {
		r.Records = DefaultRetentionRecords
	}
	return r
}

// Validate reports a negative field, with an error wrapping
// ErrInvalidConfig that names it and its value.
func (r Retention) Validate() error {
	switch {
	case r.Age < 0:
		return fmt.Errorf("%w: Retention.Age %v must not be negative", ErrInvalidConfig, r.Age)
	case r.Records < 0:
		return fmt.Errorf("%w: Retention.Records %d must not be negative", ErrInvalidConfig, r.Records)
	}
	return nil
}

// Expired reports whether, at now, the outcome record of a write applied
// at appliedAt is past r's Age: Status then no longer reports it, even
// before Ack's pruning removed it.
func (r Retention) Expired(appliedAt, now time.Time) bool {
	return now.Sub(appliedAt) > r.Age
}
