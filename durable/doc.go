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
// # Backends
//
// Store is the embedded backend (one bbolt file, fsync'd on every change,
// no server). The Redis Streams backend for a fleet, with consumer groups
// and claiming of entries whose consumer died, lives in module
// github.com/bulwark-go/bulwark/redis, package streamqueue. Both pass the
// conformance suite in package queuetest.
package durable
