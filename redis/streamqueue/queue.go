package streamqueue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulwark-go/bulwark/durable"
)

// DefaultClaimAfter is Config.ClaimAfter's default.
const DefaultClaimAfter = 30 * time.Second

// consumerGroup is the stream's consumer group, shared by all replayers.
const consumerGroup = "replayers"

// Config configures a Queue.
type Config struct {
	// Client is the Redis client; the caller owns it (Close leaves it
	// open). Required.
	Client redis.UniversalClient
	// Name names the queue (its keys' hash tag). Required.
	Name string
	// Consumer names this process in the consumer group; it must differ
	// between processes that run at the same time. Default: host name and
	// process ID.
	Consumer string
	// ClaimAfter is how long an entry leased by a consumer may stay idle
	// (not renewed by Update, not acknowledged) before another consumer
	// claims it: longer than the longest replay (default 30 s).
	ClaimAfter time.Duration
	// Logger receives a record each time this queue finds its consumer
	// group gone and recreates it (default slog.Default()).
	Logger *slog.Logger
	// Retention bounds the outcome records that Status reads once Ack
	// removed an entry (zero fields: durable.Retention's defaults, 24 h
	// and 100,000 records). Each Ack drops the records past its own
	// queue's bound: give every process of a fleet the same.
	Retention durable.Retention
}

// Queue is a durable.Queue on a Redis stream. It is safe for concurrent
// use.
type Queue struct {
	cfg    Config
	rdb    redis.UniversalClient
	k      keys
	closed atomic.Bool
	resets atomic.Int64 // consumer groups this queue recreated
}

var _ durable.Queue = (*Queue)(nil)

type keys struct{ stream, keys, applied, meta, dead, outcome, order string }

// New returns the queue cfg.Name, creating its consumer group if needed.
// It fails if Redis cannot be reached, or with an error wrapping
// durable.ErrInvalidConfig for a bad cfg.
func New(ctx context.Context, cfg Config) (*Queue, error) {
	switch {
	case cfg.Client == nil:
		return nil, fmt.Errorf("%w: streamqueue Config.Client is nil", durable.ErrInvalidConfig)
	case cfg.Name == "" || strings.ContainsAny(cfg.Name, "{}"):
		return nil, fmt.Errorf("%w: streamqueue Config.Name %q must be non-empty, without braces", durable.ErrInvalidConfig, cfg.Name)
	case cfg.ClaimAfter < 0:
		return nil, fmt.Errorf("%w: streamqueue Config.ClaimAfter %v must not be negative", durable.ErrInvalidConfig, cfg.ClaimAfter)
	}
	if err := cfg.Retention.Validate(); err != nil {
		return nil, fmt.Errorf("streamqueue Config: %w", err)
	}
	cfg.Retention = cfg.Retention.WithDefaults()
	if cfg.ClaimAfter == 0 {
		cfg.ClaimAfter = DefaultClaimAfter
	}
	if cfg.Consumer == "" {
		host, _ := os.Hostname()
		cfg.Consumer = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := "bulwark:queue:{" + cfg.Name + "}:"
	q := &Queue{cfg: cfg, rdb: cfg.Client, k: keys{p + "stream", p + "keys", p + "applied", p + "meta", p + "dead", p + "outcome", p + "order"}}
	if _, err := q.createGroup(ctx); err != nil {
		return nil, err
	}
	return q, nil
}

// createGroup creates the consumer group (and the stream) unless it
// exists, and reports whether it created it.
func (q *Queue) createGroup(ctx context.Context) (bool, error) {
	err := q.rdb.XGroupCreateMkStream(ctx, q.k.stream, consumerGroup, "0").Err()
	switch {
	case err == nil:
		return true, nil
	case strings.HasPrefix(err.Error(), "BUSYGROUP"):
		return false, nil
	}
	return false, fmt.Errorf("streamqueue: create consumer group of %s: %w", q.k.stream, err)
}

// withGroup runs op, which uses the consumer group. If Redis answers that
// the group does not exist (it restarted empty, or was flushed: the
// stream holds only what was enqueued since, with no group to read it),
// withGroup creates the group again, reading the stream from its start,
// says so once (a log record and Stats.Resets, in the process that
// recreated it), and runs op again.
func (q *Queue) withGroup(ctx context.Context, op func() error) error {
	err := op()
	if err == nil || !strings.Contains(err.Error(), "NOGROUP") {
		return err
	}
	created, cerr := q.createGroup(ctx)
	if cerr != nil {
		return errors.Join(err, cerr)
	}
	if created {
		q.resets.Add(1)
		q.cfg.Logger.Warn("bulwark: streamqueue consumer group was gone (Redis restarted empty or was flushed); recreated it: "+
			"entries accepted before it was lost are gone, unless Redis persisted them",
			slog.String("stream", q.k.stream), slog.String("group", consumerGroup))
	}
	return op()
}

// meta is what the queue keeps of an entry besides its stream fields.
type meta struct {
	Attempts   int       `json:"attempts"`
	Deliveries int       `json:"deliveries,omitempty"`
	NotBefore  time.Time `json:"not_before"`
	LastError  string    `json:"last_error,omitempty"`
}

// check returns ErrClosed once the queue is closed.
func (q *Queue) check() error {
	if q.closed.Load() {
		return durable.ErrClosed
	}
	return nil
}

// redisErr maps a script's NOTFOUND and NOTOWNER to durable.ErrNotFound.
func redisErr(op, id string, err error) error {
	if err == nil {
		return nil
	}
	if strings.Contains(err.Error(), "NOTFOUND") {
		return fmt.Errorf("%w: %s id %s", durable.ErrNotFound, op, id)
	}
	if strings.Contains(err.Error(), "NOTOWNER") {
		return fmt.Errorf("%w: %s id %s: held by another consumer", durable.ErrNotFound, op, id)
	}
	return fmt.Errorf("streamqueue: %s %s: %w", op, id, err)
}

var enqueueScript = redis.NewScript(`
local id = redis.call('HGET', KEYS[2], ARGV[1]) or redis.call('HGET', KEYS[3], ARGV[1])
if id then return id end
id = redis.call('XADD', KEYS[1], '*', 'key', ARGV[1], 'group', ARGV[2], 'command', ARGV[3], 'payload', ARGV[4], 'at', ARGV[5])
redis.call('HSET', KEYS[2], ARGV[1], id)
if ARGV[6] ~= '' then redis.call('HSET', KEYS[4], id, ARGV[6]) end
return id`)

// metaOf returns e's meta as stored for a new entry: its Deliveries, if
// any ("" for none).
func metaOf(e durable.Entry) (string, error) {
	if e.Deliveries == 0 {
		return "", nil
	}
	raw, err := json.Marshal(meta{Deliveries: e.Deliveries})
	return string(raw), err
}

// Enqueue implements durable.Queue: the entry is added to the stream and
// its key recorded in one script, acknowledged by Redis before it returns.
func (q *Queue) Enqueue(ctx context.Context, e durable.Entry) (string, error) {
	if err := q.check(); err != nil {
		return "", err
	}
	if err := e.Validate(); err != nil {
		return "", err
	}
	at := e.EnqueuedAt
	if at.IsZero() {
		at = time.Now()
	}
	md, err := metaOf(e)
	if err != nil {
		return "", err
	}
	id, err := enqueueScript.Run(ctx, q.rdb, []string{q.k.stream, q.k.keys, q.k.applied, q.k.meta},
		e.Key, e.Group, e.Command, e.Payload, at.UnixNano(), md).Text()
	if err != nil {
		return "", fmt.Errorf("streamqueue: enqueue %q: %w", e.Key, err)
	}
	return id, nil
}

// Lease implements durable.Queue for this consumer: it claims the entries
// of consumers idle for ClaimAfter, takes new entries from the stream, and
// returns the due ones of its own pending list, oldest first.
func (q *Queue) Lease(ctx context.Context, now time.Time, max int) ([]durable.Entry, error) {
	if err := q.check(); err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, nil
	}
	var msgs []redis.XMessage
	err := q.withGroup(ctx, func() error {
		msgs = msgs[:0]
		_, _, err := q.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: q.k.stream, Group: consumerGroup,
			Consumer: q.cfg.Consumer, MinIdle: q.cfg.ClaimAfter, Start: "0-0", Count: int64(max)}).Result()
		if err != nil {
			return fmt.Errorf("streamqueue: claim: %w", err)
		}
		for _, from := range []string{"0", ">"} { // our pending list, then new entries
			res, err := q.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: consumerGroup, Consumer: q.cfg.Consumer,
				Streams: []string{q.k.stream, from}, Count: int64(10 * max), Block: -1}).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return fmt.Errorf("streamqueue: read: %w", err)
			}
			for _, s := range res {
				msgs = append(msgs, s.Messages...)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	entries, err := q.entries(ctx, msgs)
	if err != nil {
		return nil, err
	}
	out := entries[:0]
	for _, e := range entries {
		if !e.NotBefore.After(now) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b durable.Entry) int { return compareIDs(a.ID, b.ID) })
	return out[:min(len(out), max)], nil
}

// entries decodes stream messages, with their meta (see decode); a
// message deleted from the stream (acknowledged meanwhile) has no values
// and is skipped.
func (q *Queue) entries(ctx context.Context, msgs []redis.XMessage) ([]durable.Entry, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	metas, err := q.rdb.HMGet(ctx, q.k.meta, ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("streamqueue: read meta: %w", err)
	}
	seen := map[string]bool{}
	var out []durable.Entry
	for i, m := range msgs {
		if len(m.Values) == 0 || seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		out = append(out, q.decode(m, metas[i]))
	}
	return out, nil
}

// decode decodes a stream message with its meta (a string, or nil for
// none). One without a key, or whose meta does not decode, comes back in
// the quarantine form of durable.Entry (Reason durable.ReasonCorrupt).
func (q *Queue) decode(m redis.XMessage, rawMeta any) durable.Entry {
	e := fromValues(m.ID, m.Values)
	if e.Key == "" {
		e.Reason, e.LastError = durable.ReasonCorrupt, fmt.Sprintf("streamqueue: entry %s of %s has no key", m.ID, q.k.stream)
	}
	if s, ok := rawMeta.(string); ok {
		var md meta
		if err := json.Unmarshal([]byte(s), &md); err != nil {
			e.Reason, e.LastError = durable.ReasonCorrupt, fmt.Sprintf("streamqueue: corrupt meta of entry %s of %s: %v", m.ID, q.k.stream, err)
		}
		e.Attempts, e.Deliveries, e.NotBefore, e.LastError = md.Attempts, md.Deliveries, md.NotBefore, cmp.Or(e.LastError, md.LastError)
	}
	return e
}

// fromValues decodes a stream entry's fields.
func fromValues(id string, v map[string]any) durable.Entry {
	str := func(k string) string { s, _ := v[k].(string); return s }
	e := durable.Entry{ID: id, Key: str("key"), Group: str("group"), Command: str("command"), Payload: []byte(str("payload"))}
	if ns, err := strconv.ParseInt(str("at"), 10, 64); err == nil {
		e.EnqueuedAt = time.Unix(0, ns)
	}
	return e
}

// compareIDs orders stream IDs (ms-seq) numerically.
func compareIDs(a, b string) int {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	for _, p := range [][2]string{{am, bm}, {as, bs}} {
		x, _ := strconv.ParseUint(p[0], 10, 64)
		y, _ := strconv.ParseUint(p[1], 10, 64)
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

var updateScript = redis.NewScript(`
if #redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1]) == 0 then return redis.error_reply('NOTFOUND') end
local p = redis.call('XPENDING', KEYS[1], ARGV[3], ARGV[1], ARGV[1], 1)
if #p == 0 or p[1][2] ~= ARGV[4] then return redis.error_reply('NOTOWNER') end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('XCLAIM', KEYS[1], ARGV[3], ARGV[4], 0, ARGV[1], 'JUSTID')
return 1`)

// Update implements durable.Queue; it also renews this consumer's lease
// on the entry (its idle time restarts), so that no other consumer claims
// it during the replay that follows. An entry this consumer no longer
// holds (another claimed it since it was leased here) is not changed: the
// error wraps durable.ErrNotFound, and the lease here is stale.
func (q *Queue) Update(ctx context.Context, e durable.Entry) error {
	if err := q.check(); err != nil {
		return err
	}
	if !validID(e.ID) {
		return fmt.Errorf("%w: update id %q", durable.ErrNotFound, e.ID)
	}
	md, err := json.Marshal(meta{Attempts: e.Attempts, Deliveries: e.Deliveries, NotBefore: e.NotBefore, LastError: e.LastError})
	if err != nil {
		return err
	}
	err = q.withGroup(ctx, func() error {
		return updateScript.Run(ctx, q.rdb, []string{q.k.stream, q.k.meta}, e.ID, md, consumerGroup, q.cfg.Consumer).Err()
	})
	return redisErr("update", e.ID, err)
}

// recordLua defines record(id, rec, i): it stores outcome record rec of
// id in the hash KEYS[5], listed in the sorted set KEYS[6] under ARGV[i]
// (now, in ms), then drops the records listed before ARGV[i+1] (the
// cutoff of Retention.Age, in ms) and the oldest past ARGV[i+2]
// (Retention.Records). Scripts that use it pass those keys and arguments.
const recordLua = `
local function record(id, rec, i)
	redis.call('HSET', KEYS[5], id, rec)
	redis.call('ZADD', KEYS[6], ARGV[i], id)
	local cutoff = '(' .. ARGV[i+1]
	local old = redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', cutoff)
	for _, o in ipairs(old) do redis.call('HDEL', KEYS[5], o) end
	if #old > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', cutoff) end
	local over = redis.call('ZCARD', KEYS[6]) - tonumber(ARGV[i+2])
	if over > 0 then
		for _, o in ipairs(redis.call('ZRANGE', KEYS[6], 0, over - 1)) do redis.call('HDEL', KEYS[5], o) end
		redis.call('ZREMRANGEBYRANK', KEYS[6], 0, over - 1)
	end
end
`

var ackScript = redis.NewScript(recordLua + `
local key = ARGV[2]
if redis.call('HGET', KEYS[3], key) == ARGV[1] then return 1 end
local m = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #m == 0 then return redis.error_reply('NOTFOUND') end
local rec = {}
local f = m[1][2]
for i = 1, #f, 2 do rec[f[i]] = f[i+1] end
key = rec['key'] or key
rec['payload'] = nil
rec['meta'] = redis.call('HGET', KEYS[4], ARGV[1]) or ''
rec['applied'] = ARGV[4]
redis.call('HSET', KEYS[3], key, ARGV[1])
redis.call('HDEL', KEYS[2], key)
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('XACK', KEYS[1], ARGV[3], ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
record(ARGV[1], cjson.encode(rec), 5)
return 1`)

// outcomeRecord is the record of an entry that Ack (or Requeue) removed
// from the stream, as the scripts store it: the entry's stream fields but
// its payload, its meta, and the time of the Ack (Unix ns); or, for an
// entry requeued, the ID it was requeued under.
type outcomeRecord struct {
	Key        string `json:"key"`
	Group      string `json:"group"`
	Command    string `json:"command"`
	At         string `json:"at"`
	Meta       string `json:"meta"`
	Applied    string `json:"applied"`
	RequeuedAs string `json:"requeued_as"`
}

// recordArgs returns the arguments of record (see recordLua) for now.
func (q *Queue) recordArgs(now time.Time) []any {
	return []any{now.UnixMilli(), now.Add(-q.cfg.Retention.Age).UnixMilli(), q.cfg.Retention.Records}
}

// Ack implements durable.Queue in one script: the key is recorded as
// applied, the outcome record written (and those past Config.Retention
// dropped), and the entry acknowledged and deleted from the stream.
func (q *Queue) Ack(ctx context.Context, e durable.Entry) error {
	if err := q.check(); err != nil {
		return err
	}
	if !validID(e.ID) {
		return fmt.Errorf("%w: ack id %q", durable.ErrNotFound, e.ID)
	}
	now := time.Now()
	args := append([]any{e.ID, e.Key, consumerGroup, now.UnixNano()}, q.recordArgs(now)...)
	err := ackScript.Run(ctx, q.rdb, []string{q.k.stream, q.k.keys, q.k.applied, q.k.meta, q.k.outcome, q.k.order}, args...).Err()
	return redisErr("ack", e.ID, err)
}

// Applied implements durable.Queue.
func (q *Queue) Applied(ctx context.Context, key string) (bool, error) {
	if err := q.check(); err != nil {
		return false, err
	}
	ok, err := q.rdb.HExists(ctx, q.k.applied, key).Result()
	if err != nil {
		return false, fmt.Errorf("streamqueue: applied %q: %w", key, err)
	}
	return ok, nil
}

// Status implements durable.Queue: it reads the entry's stream fields,
// meta, dead letter and outcome record in one transaction (MULTI), and
// follows the outcome records of a requeued entry to its new ID. An
// outcome record that does not decode is an error wrapping
// durable.ErrCorrupt.
func (q *Queue) Status(ctx context.Context, id string) (durable.Status, error) {
	if err := q.check(); err != nil {
		return durable.Status{}, err
	}
	asked := id
	for {
		if !validID(id) {
			return durable.Status{}, fmt.Errorf("%w: status id %q", durable.ErrNotFound, asked)
		}
		var msgs *redis.XMessageSliceCmd
		var md, dead, rec *redis.StringCmd
		_, err := q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			msgs = p.XRange(ctx, q.k.stream, id, id)
			md, dead, rec = p.HGet(ctx, q.k.meta, id), p.HGet(ctx, q.k.dead, id), p.HGet(ctx, q.k.outcome, id)
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return durable.Status{}, fmt.Errorf("streamqueue: status %s: %w", asked, err)
		}
		for _, c := range []redis.Cmder{msgs, md, dead, rec} {
			if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
				return durable.Status{}, fmt.Errorf("streamqueue: status %s: %w", asked, err)
			}
		}
		if m := msgs.Val(); len(m) > 0 {
			var rawMeta any
			if s, err := md.Result(); err == nil {
				rawMeta = s
			}
			return durable.Status{State: durable.StateAccepted, Entry: q.decode(m[0], rawMeta)}, nil
		}
		if raw, err := dead.Result(); err == nil {
			return durable.Status{State: durable.StateDeadLettered, Entry: q.deadEntry(id, raw)}, nil
		}
		raw, err := rec.Result()
		if err != nil {
			return durable.Status{}, fmt.Errorf("%w: status id %s", durable.ErrNotFound, asked)
		}
		var o outcomeRecord
		if err := json.Unmarshal([]byte(raw), &o); err != nil {
			return durable.Status{}, fmt.Errorf("%w: streamqueue: outcome record %s of %s: %w", durable.ErrCorrupt, id, q.k.stream, err)
		}
		if o.RequeuedAs != "" {
			if compareIDs(o.RequeuedAs, id) <= 0 {
				return durable.Status{}, fmt.Errorf("%w: streamqueue: outcome record %s of %s names an earlier ID, %s", durable.ErrCorrupt, id, q.k.stream, o.RequeuedAs)
			}
			id = o.RequeuedAs
			continue
		}
		return q.applied(id, o)
	}
}

// applied returns the status of entry id, applied as o records, or
// durable.ErrNotFound if o is past Config.Retention's Age.
func (q *Queue) applied(id string, o outcomeRecord) (durable.Status, error) {
	e := fromValues(id, map[string]any{"key": o.Key, "group": o.Group, "command": o.Command, "at": o.At})
	e.Payload = nil
	ns, err := strconv.ParseInt(o.Applied, 10, 64)
	if err != nil {
		return durable.Status{}, fmt.Errorf("%w: streamqueue: outcome record %s of %s: applied at %q", durable.ErrCorrupt, id, q.k.stream, o.Applied)
	}
	at := time.Unix(0, ns)
	if q.cfg.Retention.Expired(at, time.Now()) {
		return durable.Status{}, fmt.Errorf("%w: status id %s: its outcome record expired", durable.ErrNotFound, id)
	}
	if o.Meta != "" {
		var md meta
		if err := json.Unmarshal([]byte(o.Meta), &md); err != nil {
			return durable.Status{}, fmt.Errorf("%w: streamqueue: outcome record %s of %s: meta: %w", durable.ErrCorrupt, id, q.k.stream, err)
		}
		e.Attempts, e.Deliveries = md.Attempts, md.Deliveries
	}
	return durable.Status{State: durable.StateApplied, Entry: e, AppliedAt: at}, nil
}

var deadLetterScript = redis.NewScript(`
if #redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1]) == 0 then return redis.error_reply('NOTFOUND') end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('XACK', KEYS[1], ARGV[3], ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
return 1`)

// DeadLetter implements durable.Queue: the entry leaves the stream for the
// dead letters in one script.
func (q *Queue) DeadLetter(ctx context.Context, e durable.Entry) error {
	if err := q.check(); err != nil {
		return err
	}
	if !validID(e.ID) {
		return fmt.Errorf("%w: dead-letter id %q", durable.ErrNotFound, e.ID)
	}
	msgs, err := q.rdb.XRange(ctx, q.k.stream, e.ID, e.ID).Result()
	if err != nil {
		return fmt.Errorf("streamqueue: dead-letter %s: %w", e.ID, err)
	}
	if len(msgs) == 0 {
		return fmt.Errorf("%w: dead-letter id %s", durable.ErrNotFound, e.ID)
	}
	dead := fromValues(e.ID, msgs[0].Values)
	dead.Attempts, dead.Deliveries, dead.LastError, dead.Reason = e.Attempts, e.Deliveries, e.LastError, e.Reason
	raw, err := json.Marshal(dead)
	if err != nil {
		return err
	}
	err = deadLetterScript.Run(ctx, q.rdb, []string{q.k.stream, q.k.meta, q.k.dead}, e.ID, raw, consumerGroup).Err()
	return redisErr("dead-letter", e.ID, err)
}

// DeadLetters implements durable.Queue. One that does not decode is listed
// in the quarantine form (Reason durable.ReasonCorrupt, the raw value as
// Payload).
func (q *Queue) DeadLetters(ctx context.Context) ([]durable.Entry, error) {
	if err := q.check(); err != nil {
		return nil, err
	}
	all, err := q.rdb.HGetAll(ctx, q.k.dead).Result()
	if err != nil {
		return nil, fmt.Errorf("streamqueue: dead letters: %w", err)
	}
	out := make([]durable.Entry, 0, len(all))
	for id, raw := range all {
		out = append(out, q.deadEntry(id, raw))
	}
	slices.SortFunc(out, func(a, b durable.Entry) int { return compareIDs(a.ID, b.ID) })
	return out, nil
}

// deadEntry decodes dead letter id, stored as raw; one that does not
// decode comes back in the quarantine form (Reason durable.ReasonCorrupt,
// the raw value as Payload).
func (q *Queue) deadEntry(id, raw string) durable.Entry {
	var e durable.Entry
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		e = durable.Entry{ID: id, Payload: []byte(raw), Reason: durable.ReasonCorrupt,
			LastError: fmt.Sprintf("streamqueue: dead letter %s of %s: %v", id, q.k.stream, err)}
	}
	return e
}

var requeueScript = redis.NewScript(recordLua + `
local raw = redis.call('HGET', KEYS[3], ARGV[1])
if not raw then return redis.error_reply('NOTFOUND') end
local id = redis.call('XADD', KEYS[1], '*', 'key', ARGV[2], 'group', ARGV[3], 'command', ARGV[4], 'payload', ARGV[5], 'at', ARGV[6])
redis.call('HSET', KEYS[2], ARGV[2], id)
redis.call('HDEL', KEYS[3], ARGV[1])
if ARGV[7] ~= '' then redis.call('HSET', KEYS[4], id, ARGV[7]) end
record(ARGV[1], cjson.encode({requeued_as = id}), 8)
return id`)

// Requeue implements durable.Queue: the entry goes back to the end of the
// stream, under a new ID, with no attempts and its deliveries; an outcome
// record of the old ID (bounded by Config.Retention) names the new one,
// so that Status of the old ID follows the write. One dead-lettered as
// corrupt is refused with durable.ErrCorrupt.
func (q *Queue) Requeue(ctx context.Context, id string) error {
	if err := q.check(); err != nil {
		return err
	}
	raw, err := q.rdb.HGet(ctx, q.k.dead, id).Result()
	if errors.Is(err, redis.Nil) {
		return fmt.Errorf("%w: requeue id %q", durable.ErrNotFound, id)
	}
	if err != nil {
		return fmt.Errorf("streamqueue: requeue %s: %w", id, err)
	}
	var e durable.Entry
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		return fmt.Errorf("%w: streamqueue: dead letter %s of %s: %w", durable.ErrCorrupt, id, q.k.stream, err)
	}
	if e.Reason == durable.ReasonCorrupt {
		return fmt.Errorf("%w: streamqueue: dead letter %s of %s was quarantined as corrupt: %s", durable.ErrCorrupt, id, q.k.stream, e.LastError)
	}
	md, err := metaOf(e)
	if err != nil {
		return err
	}
	args := append([]any{id, e.Key, e.Group, e.Command, e.Payload, e.EnqueuedAt.UnixNano(), md}, q.recordArgs(time.Now())...)
	err = requeueScript.Run(ctx, q.rdb, []string{q.k.stream, q.k.keys, q.k.dead, q.k.meta, q.k.outcome, q.k.order}, args...).Err()
	return redisErr("requeue", id, err)
}

// Stats implements durable.Queue. Oldest is the enqueue time of the first
// entry in the stream (a requeued entry goes to the end).
func (q *Queue) Stats(ctx context.Context) (durable.Stats, error) {
	if err := q.check(); err != nil {
		return durable.Stats{}, err
	}
	pipe := q.rdb.Pipeline()
	n := pipe.XLen(ctx, q.k.stream)
	first := pipe.XRangeN(ctx, q.k.stream, "-", "+", 1)
	dead := pipe.HLen(ctx, q.k.dead)
	if _, err := pipe.Exec(ctx); err != nil {
		return durable.Stats{}, fmt.Errorf("streamqueue: stats: %w", err)
	}
	st := durable.Stats{Depth: int(n.Val()), DeadLetters: int(dead.Val()), Resets: q.resets.Load()}
	if msgs := first.Val(); len(msgs) > 0 {
		st.Oldest = fromValues(msgs[0].ID, msgs[0].Values).EnqueuedAt
	}
	return st, nil
}

// Close implements durable.Queue; it leaves the client open.
func (q *Queue) Close() error {
	q.closed.Store(true)
	return nil
}

// validID reports whether id looks like a stream ID (ms-seq).
func validID(id string) bool {
	ms, seq, ok := strings.Cut(id, "-")
	_, err1 := strconv.ParseUint(ms, 10, 64)
	_, err2 := strconv.ParseUint(seq, 10, 64)
	return ok && err1 == nil && err2 == nil
}
