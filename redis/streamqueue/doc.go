// Package streamqueue is the Redis Streams backend of durable.Queue, for a
// fleet: every process enqueues into one stream, and the replayers of all
// processes share it through a consumer group. An entry leased by a
// consumer stays in that consumer's pending list until it is acknowledged
// or dead-lettered; when a consumer dies (its process is killed), the
// entries it held are claimed by another consumer (XAUTOCLAIM) once they
// have been idle for ClaimAfter.
//
//	q, err := streamqueue.New(ctx, streamqueue.Config{Client: rdb, Name: "orders"})
//	...
//	rp, err := durable.NewReplayer(durable.ReplayerConfig{Queue: q, Group: orders, Apply: createOrder})
//
// Enqueue returns once Redis acknowledged the write (XADD, in a script
// that also records the idempotency key): the entry is as durable as the
// server's persistence makes it (use appendonly yes with appendfsync
// always, or replicas, for "accepted" to survive the server's crash). If
// Redis is down, Enqueue fails and a durable.Write is not accepted.
//
// Delivery is at least once, as for every durable.Queue: a consumer that
// replays an entry for longer than ClaimAfter without renewing it (Update
// renews it) may see it claimed and replayed by another; the idempotency
// key makes that harmless at a receiver that honours it.
//
// When Redis restarts empty (no persistence) or is flushed, the consumer
// group is gone with the entries it held, while new writes still create
// the stream: the first command that meets Redis's NOGROUP answer creates
// the group again, reading the stream from its start, so what was
// enqueued since is replayed. The process that recreated it logs it once
// (Warn) and counts it in Stats.Resets: the writes accepted before the
// loss are gone unless Redis persisted them.
//
// Status (for durable.StatusHandler) reads an entry, its dead letter or
// its outcome record in one MULTI transaction. Ack writes the outcome
// record in the script that acknowledges the entry, and Requeue, which
// gives the entry a new stream ID, writes one that names it; both drop the
// records past Config.Retention (durable.Retention: by default 24 h and
// 100,000 records).
//
// Keys used, all with the hash tag {Name} so that a cluster keeps them in
// one slot: bulwark:queue:{Name}:stream (the entries), :keys (pending and
// dead keys → ID), :applied (acknowledged keys → ID, never pruned), :meta
// (ID → attempts, deliveries, backoff, last error), :dead (ID →
// dead-lettered entry), :outcome (ID → outcome record, bounded by
// Retention), :order (the outcome records' IDs by time of Ack or
// requeue, in ms).
//
// go-redis logs its own trouble through one process-wide logger (stderr
// by default), which this package leaves alone: to send it to slog, call
// redis.SetLogger once in main (see package fleet's example).
package streamqueue
