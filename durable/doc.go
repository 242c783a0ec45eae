// Package durable is bulwark's write path: a write that cannot be applied
// now (its dependency fails, times out, or its breaker or bulkhead refuses
// it) is stored in a durable queue before the caller is answered
// "accepted", and a Replayer applies it once the dependency has recovered.
//
// A Write is a command whose fallback enqueues; the call then answers with
// Info.Deferred (an HTTP handler answers 202 Accepted with the entry ID as
// a token). If the write cannot be stored (disk full, unwritable file,
// Redis down), the call fails with ErrNotAccepted: nothing is reported
// accepted that was not stored.
//
//	q, err := durable.OpenStore("orders.queue")
//	...
//	r, info, err := command.ExecuteInfo(ctx, orders, durable.Write{
//		Command: "createOrder", Key: requestID, Payload: body, Apply: createOrder, Queue: q})
//
//	rp, err := durable.NewReplayer(durable.ReplayerConfig{Queue: q, Group: orders, Apply: createOrder})
//	go rp.Run(ctx)
//
// # Guarantee
//
// At-least-once delivery plus an idempotency key: every accepted write is
// applied or dead-lettered, never dropped; a replay may be delivered again
// after a crash (between the receiver applying it and the queue recording
// it as applied), always with the same Entry.Key. A receiver that applies
// each key at most once thus applies every write exactly once. The queue
// records acknowledged keys, so a retried request whose write was already
// accepted or applied is not queued twice.
//
// # Attempts
//
// An attempt is evidence about the write: a replay that reached the
// dependency, which answered and refused this write. A Replayer counts
// attempts in Entry.Attempts and dead-letters a write after MaxAttempts
// of them (default 3); it dead-letters at once one the dependency refused
// for good (BAD_REQUEST, or ReplayerConfig.Classify's Permanent). An
// outage is never an attempt: a timeout, a connection error, a 5xx (any
// FAILURE that Classify does not judge Refused or Permanent; by default
// only a panic in Apply is Refused), a short-circuit, a rejection, a
// failed half-open probe, a replay cut off by a crash. It only delays the
// write, with backoff (Backoff doubled per delivery, default 1 s, up to
// MaxBackoff, default 1 min), until the write is older than MaxAge
// (default 24 h; NoMaxAge for none): it is then dead-lettered with
// ReasonMaxAge. See Replayer for each outcome.
//
// A dead letter says why (Entry.Reason), how many attempts the dependency
// refused (Attempts), and how many deliveries may have reached the
// receiver (Deliveries: the original call's, if its Run began, and every
// replay begun, counted before it begins, so one cut off by a crash
// counts).
//
// # Damage
//
// Damage never crashes the process, and one damaged entry never stops the
// queue. A Store file that is truncated or whose pages do not read back
// is an error wrapping ErrCorrupt that names the file, at open
// (CheckOnOpen runs a full check) or at the first call that meets the
// damage, and every later call returns it; an entry that does not decode
// is quarantined in the dead letters with ReasonCorrupt, and the entries
// after it are replayed.
//
// # Backends
//
// Store is the embedded backend (one bbolt file, fsync'd on every change,
// no server). The Redis Streams backend for a fleet, with consumer groups
// and claiming of entries whose consumer died, lives in module
// github.com/bulwark-go/bulwark/redis, package streamqueue. Both pass the
// conformance suite in package queuetest.
package durable
