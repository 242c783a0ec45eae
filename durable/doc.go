// Package durable is bulwark's write path: a write that cannot be applied
// now (its dependency fails, times out, or its breaker or bulkhead refuses
// it) is stored in a durable queue before the caller is answered
// "accepted", and a Replayer applies it once the dependency has recovered.
//
// A Write is a command whose fallback enqueues; the call then answers with
// DEGRADED_DEFERRED among its Info.Events (an HTTP handler answers 202
// Accepted, its Location naming the write's status: see Status below). If the write cannot be stored
// (disk full, unwritable file, Redis down), the call fails with
// ErrNotAccepted: nothing is reported accepted that was not stored.
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
// # Status
//
// A client told 202 Accepted polls the write's status. StatusHandler is
// an http.Handler that answers it from the queue (Queue.Status): accepted
// (with attempts, deliveries, age and when the next replay is due, and
// Retry-After), applied (when), or dead-lettered (why), as JSON; 404 for a
// token not issued here, 410 for one whose record is no longer kept.
// Tokens are signed (HMAC-SHA256 with StatusConfig.Secret): a client
// cannot read the status of a write whose token it was not given.
//
//	status, err := durable.NewStatusHandler(durable.StatusConfig{Queue: q, Secret: secret})
//	mux.Handle("GET /orders/status/{token}", status)
//	// on info.Events.Has(metrics.DegradedDeferred):
//	w.Header().Set("Location", "/orders/status/"+status.Token(r))
//	w.WriteHeader(http.StatusAccepted)
//
// Once a write is applied, Ack removes its entry and keeps an outcome
// record in its place, written in the same atomic step as the key's
// applied mark: "applied" is answered only from such a record. The
// records are bounded by a Retention (default 24 h after the Ack, and
// 100,000 records; KeepOutcomes for a Store, Config.Retention for Redis):
// past it, the write's status is 410 Gone, its outcome unknown to the
// handler, never "applied". See StatusHandler for each answer.
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
