package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
)

// Defaults of ReplayerConfig.
const (
	DefaultMaxAttempts = 3
	DefaultMaxAge      = 24 * time.Hour
	DefaultBackoff     = time.Second
	DefaultMaxBackoff  = time.Minute
	DefaultPoll        = time.Second
	DefaultBatch       = 16
)

// NoMaxAge, as ReplayerConfig.MaxAge, keeps a write through outages of
// any length: only the dependency's refusals dead-letter it.
const NoMaxAge time.Duration = -1

// Verdict is what a failed replay says about its write; see
// ReplayerConfig.Classify.
type Verdict int

const (
	// Outage: the failure says nothing about the write (the dependency
	// was unreachable, overloaded or failing). The write waits, with
	// backoff, and uses no attempt; only MaxAge ends its wait.
	Outage Verdict = iota
	// Refused: the dependency answered and refused this write, in a way
	// another try may change (a conflict, a lock, a rule of its own). The
	// replay is an attempt; after MaxAttempts of them the write is
	// dead-lettered.
	Refused
	// Permanent: the dependency refused this write for good, as a
	// BAD_REQUEST does. The write is dead-lettered at once.
	Permanent
)

// String returns the verdict's name: outage, refused or permanent.
func (v Verdict) String() string {
	switch v {
	case Outage:
		return "outage"
	case Refused:
		return "refused"
	case Permanent:
		return "permanent"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// ReplayerConfig configures a Replayer. Zero values take the defaults.
type ReplayerConfig struct {
	// Queue holds the deferred writes. Required.
	Queue Queue
	// Group is the dependency the writes go to: replays run through
	// command.Execute in it, so they pass its breakers (a replay in the
	// half-open state is a probe; ramp-up sheds replays as it sheds
	// calls) and its bulkhead, and count in its metrics. Its IsBadRequest
	// makes a replay BAD_REQUEST (Permanent). Required.
	Group *command.Group
	// Apply applies one write (the same function the Write used).
	// Required.
	Apply ApplyFunc
	// Classify judges a replay that ended as FAILURE, from Apply's error:
	// Outage, Refused or Permanent (see Replayer for what each does).
	// A panic in it, or an unknown verdict, makes the failure an Outage
	// and is logged. Default: Outage, except for a panic in Apply (an
	// *isolation.PanicError), which is Refused: a write that makes its
	// own replay panic is not retried for ever.
	Classify func(err error) Verdict
	// MaxAttempts is how many replays the dependency may refuse
	// (Refused) before the write is dead-lettered (default 3).
	MaxAttempts int
	// MaxAge bounds how long outages may delay a write: a replay that
	// fails for an outage (or that the group's breaker or bulkhead
	// refuses) once the write is older than MaxAge (since EnqueuedAt)
	// dead-letters it with ReasonMaxAge. Default 24 h: an outage longer
	// than a day puts its writes in front of an operator, who may
	// requeue them. NoMaxAge: no limit.
	MaxAge time.Duration
	// Backoff is the wait before a write is replayed again after a failed
	// replay, doubled at each further failure up to MaxBackoff (defaults
	// 1 s and 1 min); see Replayer for the count it doubles with. The
	// replayer itself waits as long after consecutive outage failures,
	// at least Poll.
	Backoff, MaxBackoff time.Duration
	// Poll is how long the replayer waits when the queue has nothing due
	// or the group's breaker is open or refuses a replay (default 1 s).
	Poll time.Duration
	// Batch is how many entries it leases at a time (default 16).
	Batch int
	// OnDeadLetter, if set, is called with each entry dead-lettered, after
	// it was moved to the queue's dead letters.
	OnDeadLetter func(Entry)
	// Logger receives a record per dead-lettered entry, per outage (when
	// replays start failing for one) and per queue error (default
	// slog.Default()).
	Logger *slog.Logger
}

// withDefaults returns c with its zero fields set to the defaults.
func (c ReplayerConfig) withDefaults() ReplayerConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	def(&c.MaxAge, DefaultMaxAge)
	def(&c.Backoff, DefaultBackoff)
	def(&c.MaxBackoff, DefaultMaxBackoff)
	def(&c.Poll, DefaultPoll)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate reports the first invalid field.
func (c ReplayerConfig) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	}
	switch {
	case c.Queue == nil:
		return bad("ReplayerConfig.Queue is nil")
	case c.Group == nil:
		return bad("ReplayerConfig.Group is nil")
	case c.Apply == nil:
		return bad("ReplayerConfig.Apply is nil")
	case c.MaxAttempts < 1:
		return bad("MaxAttempts %d must be at least 1", c.MaxAttempts)
	case c.MaxAge < 0 && c.MaxAge != NoMaxAge:
		return bad("MaxAge %v must be positive, or NoMaxAge", c.MaxAge)
	case c.Backoff < 0 || c.MaxBackoff < c.Backoff:
		return bad("Backoff %v and MaxBackoff %v: need 0 <= Backoff <= MaxBackoff", c.Backoff, c.MaxBackoff)
	case c.Poll < 0:
		return bad("Poll %v must not be negative", c.Poll)
	case c.Batch < 1:
		return bad("Batch %d must be at least 1", c.Batch)
	}
	return nil
}

// Replayer drains a Queue into its dependency after recovery. Run replays
// the due entries, oldest first, through command.Execute in the group, so
// a replay is protected like any call: while the group's breaker is open
// the replayer waits.
//
// # Attempts
//
// An attempt is evidence about the write: a replay that reached the
// dependency, which answered and refused the write. Each replay ends in
// one of these ways:
//
//   - SUCCESS: the entry is acknowledged (applied).
//   - BAD_REQUEST, or a FAILURE that Classify judges Permanent: an
//     attempt, and the entry is dead-lettered at once (ReasonBadRequest).
//   - A FAILURE that Classify judges Refused: an attempt. After
//     MaxAttempts of them the entry is dead-lettered (ReasonAttempts);
//     before, it waits Backoff doubled per attempt, up to MaxBackoff.
//   - An outage: a TIMEOUT, or a FAILURE that Classify judges Outage
//     (by default every FAILURE but a panic: a connection error, a 5xx).
//     No attempt: the entry waits Backoff doubled per delivery, up to
//     MaxBackoff; the round stops, and the replayer waits Backoff doubled
//     per consecutive outage failure, up to MaxBackoff (at least Poll),
//     so an outage is probed at a bounded rate, with the oldest due
//     write, not with every entry. Once the write is older than MaxAge,
//     it is dead-lettered instead (ReasonMaxAge).
//   - SHORT_CIRCUITED, *_REJECTED, RATE_LIMITED, THROTTLED, QUEUE_TIMEOUT, READ_ONLY
//     (a replay is a write: a read-only group holds the queue): bulwark
//     refused the replay itself and the write never left: no attempt, no
//     delivery; the round stops and the entry is due again at once
//     (older than MaxAge, it is dead-lettered as for an outage).
//   - CANCELLED (ctx ended), or a crash of the process: no attempt.
//
// A failed half-open probe is one of the above (an outage, mostly): a
// probe never uses an attempt for a reason that is not the write's.
//
// # Deliveries
//
// Entry.Deliveries counts the times the write may have reached the
// receiver. It is stored before each replay's Apply begins, together with
// a NotBefore of Backoff doubled per delivery, so a replay cut off by a
// crash counts as a delivery and makes the entry wait before the next
// one: a write that crashes its replayer every time is retried at most
// every MaxBackoff, until MaxAge, while the entries after it go on. A
// dead letter thus says both how often the dependency refused the write
// (Attempts) and how many deliveries may have reached it (Deliveries).
//
// # Guarantee
//
// Every entry a Queue accepted is applied or dead-lettered, never
// dropped. Delivery is at least once: Ack (which records the key as
// applied and removes the entry in one step) follows a successful replay,
// so a crash between the two replays the entry again, with the same
// Entry.Key. A receiver that applies each key at most once therefore
// applies every write exactly once ("effectively once"); one that ignores
// the key may apply a write twice after a crash.
//
// An entry Lease returns as corrupt (Reason ReasonCorrupt) is
// dead-lettered as it is, without a replay, and the queue goes on.
// Dead-lettering moves an entry to the queue's dead letters, logs it (with
// its attempts, deliveries and reason) and passes it to OnDeadLetter.
type Replayer struct {
	cfg                             ReplayerConfig
	replayed, deadLettered, outages atomic.Int64
	streak                          atomic.Int64 // consecutive outage failures
	mu                              sync.Mutex
	stats                           Stats // the queue's, as of the last round
	statsErr                        error
}

// NewReplayer returns a Replayer, or an error wrapping ErrInvalidConfig
// that names the bad field.
func NewReplayer(cfg ReplayerConfig) (*Replayer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Replayer{cfg: cfg}, nil
}

// Run replays until ctx ends, then returns ctx's error. Run one Replayer
// per queue at a time per process (a Redis queue may have one per
// process of a fleet).
func (r *Replayer) Run(ctx context.Context) error {
	for {
		wait := r.round(ctx)
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// Drain replays until no entry is due, the group's breaker is open or
// refuses a replay, a replay fails for an outage, or ctx ends; it returns
// how many entries it applied. For tests and for a one-shot drain at
// start-up.
func (r *Replayer) Drain(ctx context.Context) (int, error) {
	before := r.replayed.Load()
	for ctx.Err() == nil {
		if r.round(ctx) > 0 {
			break
		}
	}
	return int(r.replayed.Load() - before), ctx.Err()
}

// round replays one batch of due entries and returns how long to wait
// before the next round: 0 to go on at once.
func (r *Replayer) round(ctx context.Context) time.Duration {
	defer r.refreshStats(ctx)
	if r.cfg.Group.Breaker().State() == circuit.Open {
		return r.cfg.Poll
	}
	entries, err := r.cfg.Queue.Lease(ctx, time.Now(), r.cfg.Batch)
	if err != nil {
		if ctx.Err() == nil {
			r.cfg.Logger.Error("bulwark: durable queue lease failed", slog.String("group", r.cfg.Group.Name()), slog.Any("err", err))
		}
		return r.cfg.Poll
	}
	if len(entries) == 0 {
		return r.cfg.Poll
	}
	for _, e := range entries {
		if wait := r.replay(ctx, e); wait > 0 {
			return wait
		}
	}
	return 0
}

// replay replays e once; it returns how long to wait before the next
// round when the round should stop (an outage, a refusal by the group,
// a queue error, ctx's end), else 0.
func (r *Replayer) replay(ctx context.Context, e Entry) time.Duration {
	switch {
	case e.Reason == ReasonCorrupt:
		return r.deadLetter(ctx, e, ReasonCorrupt, e.LastError)
	case e.Attempts >= r.cfg.MaxAttempts: // MaxAttempts was lowered since
		return r.deadLetter(ctx, e, ReasonAttempts, fmt.Sprintf("refused %d times (MaxAttempts %d): %s", e.Attempts, r.cfg.MaxAttempts, e.LastError))
	}
	q := r.cfg.Queue
	before := e
	e.Deliveries++
	e.NotBefore = time.Now().Add(r.backoff(e.Deliveries)) // holds if this delivery is cut off
	if err := q.Update(ctx, e); errors.Is(err, ErrNotFound) {
		return 0 // applied, or taken over by another consumer, since the lease
	} else if err != nil {
		return r.queueFailed(ctx, "update", e, err)
	}
	_, info, err := command.ExecuteInfo(ctx, r.cfg.Group, replayCall{e: e, apply: r.cfg.Apply}, command.WithName(e.Command))
	verdict, label := Outage, "refused for good: "
	switch info.Event {
	case metrics.Success:
		r.streak.Store(0)
		if err := q.Ack(ctx, e); err != nil {
			return r.queueFailed(ctx, "ack", e, err)
		}
		r.replayed.Add(1)
		return 0
	case metrics.BadRequest:
		verdict, label = Permanent, "bad request: "
	case metrics.Failure:
		verdict = r.classify(err)
	case metrics.Timeout:
	case metrics.Cancelled:
		return r.cfg.Poll // the delivery stays counted, with its backoff
	default: // refused by the group: the write did not leave
		if r.tooOld(before) {
			return r.deadLetter(context.WithoutCancel(ctx), before, ReasonMaxAge, r.maxAgeError(before, err))
		}
		if err := q.Update(context.WithoutCancel(ctx), before); err != nil {
			return r.queueFailed(ctx, "update", e, err)
		}
		return r.cfg.Poll
	}
	e.LastError = err.Error()
	switch verdict {
	case Permanent:
		r.streak.Store(0)
		e.Attempts++
		return r.deadLetter(ctx, e, ReasonBadRequest, label+e.LastError)
	case Refused:
		r.streak.Store(0)
		e.Attempts++
		if e.Attempts >= r.cfg.MaxAttempts {
			return r.deadLetter(ctx, e, ReasonAttempts, fmt.Sprintf("refused %d times: %s", e.Attempts, e.LastError))
		}
		e.NotBefore = time.Now().Add(r.backoff(e.Attempts))
		if err := q.Update(ctx, e); err != nil {
			return r.queueFailed(ctx, "update", e, err)
		}
		return 0
	}
	r.outages.Add(1)
	if r.streak.Add(1) == 1 {
		r.cfg.Logger.Warn("bulwark: deferred writes delayed by an outage; no attempt is used", slog.String("group", r.cfg.Group.Name()),
			slog.String("command", e.Command), slog.String("err", e.LastError))
	}
	if r.tooOld(e) {
		return r.deadLetter(ctx, e, ReasonMaxAge, r.maxAgeError(e, err))
	}
	if err := q.Update(ctx, e); err != nil {
		return r.queueFailed(ctx, "update", e, err)
	}
	return max(r.cfg.Poll, r.backoff(int(r.streak.Load())))
}

// classify runs Classify (or the default) on a FAILURE's error; a panic
// in it or an unknown verdict is an Outage, logged.
func (r *Replayer) classify(err error) (v Verdict) {
	if r.cfg.Classify == nil {
		var pe *isolation.PanicError
		if errors.As(err, &pe) {
			return Refused
		}
		return Outage
	}
	defer func() {
		if p := recover(); p != nil {
			r.cfg.Logger.Error("bulwark: ReplayerConfig.Classify panicked; the failure counts as an outage",
				slog.String("group", r.cfg.Group.Name()), slog.Any("panic", p))
			v = Outage
		}
	}()
	switch v := r.cfg.Classify(err); v {
	case Outage, Refused, Permanent:
		return v
	default:
		r.cfg.Logger.Error("bulwark: ReplayerConfig.Classify returned an unknown verdict; the failure counts as an outage",
			slog.String("group", r.cfg.Group.Name()), slog.Int("verdict", int(v)))
		return Outage
	}
}

// tooOld reports whether e is older than MaxAge.
func (r *Replayer) tooOld(e Entry) bool {
	return r.cfg.MaxAge != NoMaxAge && time.Since(e.EnqueuedAt) > r.cfg.MaxAge
}

// maxAgeError is the LastError of an entry dead-lettered for its age.
func (r *Replayer) maxAgeError(e Entry, err error) string {
	return fmt.Sprintf("not applied within MaxAge %v (accepted %v ago), outages only: %v", r.cfg.MaxAge, time.Since(e.EnqueuedAt).Round(time.Second), err)
}

// backoff returns Backoff doubled n-1 times, at most MaxBackoff.
func (r *Replayer) backoff(n int) time.Duration {
	d := r.cfg.Backoff
	for i := 1; i < n && d < r.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, r.cfg.MaxBackoff)
}

// deadLetter moves e to the dead letters with reason and lastError, logs
// it and tells OnDeadLetter; it returns 0 to go on with the round, or
// the wait of a queue error.
func (r *Replayer) deadLetter(ctx context.Context, e Entry, reason, lastError string) time.Duration {
	e.Reason, e.LastError = reason, lastError
	if err := r.cfg.Queue.DeadLetter(ctx, e); err != nil {
		return r.queueFailed(ctx, "dead-letter", e, err)
	}
	r.deadLettered.Add(1)
	r.cfg.Logger.Warn("bulwark: deferred write dead-lettered", slog.String("group", r.cfg.Group.Name()),
		slog.String("command", e.Command), slog.String("key", e.Key), slog.String("id", e.ID), slog.String("reason", e.Reason),
		slog.Int("attempts", e.Attempts), slog.Int("deliveries", e.Deliveries), slog.String("last_error", e.LastError))
	if r.cfg.OnDeadLetter != nil {
		r.cfg.OnDeadLetter(e)
	}
	return 0
}

// queueFailed logs a queue error (unless ctx ended) and stops the round
// for Poll.
func (r *Replayer) queueFailed(ctx context.Context, op string, e Entry, err error) time.Duration {
	if ctx.Err() == nil && !errors.Is(err, ErrClosed) {
		r.cfg.Logger.Error("bulwark: durable queue "+op+" failed", slog.String("group", r.cfg.Group.Name()),
			slog.String("id", e.ID), slog.Any("err", err))
	}
	return r.cfg.Poll
}

// refreshStats reads the queue's stats for ReplayStats.
func (r *Replayer) refreshStats(ctx context.Context) {
	st, err := r.cfg.Queue.Stats(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.stats = st
	}
	r.statsErr = err
}

// ReplayStats is what an operator watches after a recovery.
type ReplayStats struct {
	// Group names the replayer's group.
	Group string
	// Stats is the queue's, as of the replayer's last round (at most Poll
	// old while it runs; zero before its first round).
	Stats
	// OldestAge is how long the oldest pending entry has waited, now.
	OldestAge time.Duration
	// Replayed and DeadLettered count the entries this Replayer applied
	// and dead-lettered since it was created; Outages counts its replays
	// that failed for an outage (each delayed its write, using no
	// attempt).
	Replayed, DeadLettered, Outages int64
	// Err is the error of the last attempt to read the queue's stats.
	Err error
}

// Stats returns the replayer's counts and the queue's backlog.
func (r *Replayer) Stats() ReplayStats {
	r.mu.Lock()
	s := ReplayStats{Group: r.cfg.Group.Name(), Stats: r.stats, Err: r.statsErr}
	r.mu.Unlock()
	if !s.Oldest.IsZero() {
		s.OldestAge = time.Since(s.Oldest)
	}
	s.Replayed, s.DeadLettered, s.Outages = r.replayed.Load(), r.deadLettered.Load(), r.outages.Load()
	return s
}

// replayCall is the command a replay runs: Apply, with no fallback (a
// replay that fails stays in the queue; it is never deferred again).
type replayCall struct {
	command.NoFallback
	e     Entry
	apply ApplyFunc
}

func (c replayCall) Run(ctx context.Context) (struct{}, error) {
	return struct{}{}, c.apply(ctx, c.e)
}

// Write marks a replay as a write: a read-only group (see
// command.GroupConfig.ReadOnly) holds the queue until it takes writes again.
func (replayCall) Write() bool { return true }

// QueueEvent is the replayer's event on the dashboard stream (type
// BulwarkQueue); the dashboard page shows one tile per group.
type QueueEvent struct {
	Type         string `json:"type"` // "BulwarkQueue"
	Name         string `json:"name"` // the group
	Backlog      int    `json:"backlog"`
	OldestAgeMs  int64  `json:"oldestAgeMs"`
	Replayed     int64  `json:"replayed"`
	DeadLettered int64  `json:"deadLettered"`
	DeadLetters  int    `json:"deadLetters"`
	Outages      int64  `json:"outages"`
	Resets       int64  `json:"resets"`
}

// StreamEvent returns the replayer's stats as a dashboard event, for
// dashboard.Config.Extra:
//
//	dashboard.Config{Extra: func() []any { return []any{rp.StreamEvent()} }}
func (r *Replayer) StreamEvent() QueueEvent {
	s := r.Stats()
	return QueueEvent{Type: "BulwarkQueue", Name: s.Group, Backlog: s.Depth, OldestAgeMs: s.OldestAge.Milliseconds(),
		Replayed: s.Replayed, DeadLettered: s.DeadLettered, DeadLetters: s.DeadLetters, Outages: s.Outages, Resets: s.Resets}
}
