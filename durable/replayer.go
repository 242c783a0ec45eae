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
	"github.com/bulwark-go/bulwark/metrics"
)

// Defaults of ReplayerConfig.
const (
	DefaultMaxAttempts = 3
	DefaultBackoff     = time.Second
	DefaultMaxBackoff  = time.Minute
	DefaultPoll        = time.Second
	DefaultBatch       = 16
)

// ReplayerConfig configures a Replayer. Zero values take the defaults.
type ReplayerConfig struct {
	// Queue holds the deferred writes. Required.
	Queue Queue
	// Group is the dependency the writes go to: replays run through
	// command.Execute in it, so they pass its breakers (a replay in the
	// half-open state is a probe; ramp-up sheds replays as it sheds
	// calls) and its bulkhead, and count in its metrics. Required.
	Group *command.Group
	// Apply applies one write (the same function the Write used).
	// Required.
	Apply ApplyFunc
	// MaxAttempts is how many replays an entry gets before it is
	// dead-lettered (default 3).
	MaxAttempts int
	// Backoff is the wait after the first failed attempt; each further
	// failure doubles it, up to MaxBackoff (defaults 1 s and 1 min).
	Backoff, MaxBackoff time.Duration
	// Poll is how long the replayer waits when the queue has nothing due
	// or the group's breaker is open (default 1 s).
	Poll time.Duration
	// Batch is how many entries it leases at a time (default 16).
	Batch int
	// OnDeadLetter, if set, is called with each entry dead-lettered, after
	// it was moved to the queue's dead letters.
	OnDeadLetter func(Entry)
	// Logger receives a record per dead-lettered entry and per queue
	// error (default slog.Default()).
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
// the replayer waits, and a replay the breaker or the bulkhead refuses is
// not an attempt.
//
// The guarantee: every entry a Queue accepted is applied or dead-lettered,
// never dropped. Delivery is at least once: Attempts is stored before each
// replay, and Ack (which records the key as applied and removes the entry
// in one step) after it succeeded, so a crash between the two replays the
// entry again, with the same Entry.Key. A receiver that applies each key at
// most once therefore applies every write exactly once ("effectively
// once"); one that ignores the key may apply a write twice after a crash.
//
// An entry is dead-lettered (moved to the queue's dead letters, logged,
// passed to OnDeadLetter) after MaxAttempts replays began without success,
// a replay cut off by a crash included (a write that crashes its replayer
// must not loop forever), or at once when the replay is a BAD_REQUEST (the
// receiver refused the write itself: retrying cannot help). Between failed
// attempts it waits Backoff, doubled each time up to MaxBackoff.
type Replayer struct {
	cfg                    ReplayerConfig
	replayed, deadLettered atomic.Int64
	mu                     sync.Mutex
	stats                  Stats // the queue's, as of the last round
	statsErr               error
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
// refuses a replay, or ctx ends; it returns how many entries it applied.
// For tests and for a one-shot drain at start-up.
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
		if !r.replay(ctx, e) {
			return r.cfg.Poll
		}
	}
	return 0
}

// replay replays e once; it returns false when the round should stop (the
// dependency refused the call, the queue failed, ctx ended).
func (r *Replayer) replay(ctx context.Context, e Entry) bool {
	q := r.cfg.Queue
	if e.Attempts >= r.cfg.MaxAttempts { // its last attempt was cut off
		e.LastError = fmt.Sprintf("%d attempts, the last one interrupted", e.Attempts)
		return r.deadLetter(ctx, e)
	}
	e.Attempts++
	if err := q.Update(ctx, e); err != nil {
		return r.queueFailed(ctx, "update", e, err)
	}
	_, info, err := command.ExecuteInfo(ctx, r.cfg.Group, replayCall{e: e, apply: r.cfg.Apply}, command.WithName(e.Command))
	switch info.Event {
	case metrics.Success:
		if err := q.Ack(ctx, e); err != nil {
			return r.queueFailed(ctx, "ack", e, err)
		}
		r.replayed.Add(1)
		return true
	case metrics.BadRequest:
		e.LastError = "bad request: " + err.Error()
		return r.deadLetter(ctx, e)
	case metrics.Failure, metrics.Timeout:
		e.LastError = err.Error()
		if e.Attempts >= r.cfg.MaxAttempts {
			return r.deadLetter(ctx, e)
		}
		e.NotBefore = time.Now().Add(r.backoff(e.Attempts))
		if err := q.Update(ctx, e); err != nil {
			return r.queueFailed(ctx, "update", e, err)
		}
		return true
	}
	// Refused (short-circuited, rejected, queue timeout) or cancelled: the
	// write did not reach the dependency, so this was no attempt.
	e.Attempts--
	if err := q.Update(context.WithoutCancel(ctx), e); err != nil {
		return r.queueFailed(ctx, "update", e, err)
	}
	return false
}

// backoff returns the wait after the n-th failed attempt.
func (r *Replayer) backoff(n int) time.Duration {
	d := r.cfg.Backoff
	for i := 1; i < n && d < r.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, r.cfg.MaxBackoff)
}

// deadLetter moves e to the dead letters, logs it and tells OnDeadLetter.
func (r *Replayer) deadLetter(ctx context.Context, e Entry) bool {
	if err := r.cfg.Queue.DeadLetter(ctx, e); err != nil {
		return r.queueFailed(ctx, "dead-letter", e, err)
	}
	r.deadLettered.Add(1)
	r.cfg.Logger.Warn("bulwark: deferred write dead-lettered", slog.String("group", r.cfg.Group.Name()),
		slog.String("command", e.Command), slog.String("key", e.Key), slog.String("id", e.ID),
		slog.Int("attempts", e.Attempts), slog.String("last_error", e.LastError))
	if r.cfg.OnDeadLetter != nil {
		r.cfg.OnDeadLetter(e)
	}
	return true
}

// queueFailed logs a queue error (unless ctx ended) and stops the round.
func (r *Replayer) queueFailed(ctx context.Context, op string, e Entry, err error) bool {
	if ctx.Err() == nil && !errors.Is(err, ErrClosed) {
		r.cfg.Logger.Error("bulwark: durable queue "+op+" failed", slog.String("group", r.cfg.Group.Name()),
			slog.String("id", e.ID), slog.Any("err", err))
	}
	return false
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
	// and dead-lettered since it was created.
	Replayed, DeadLettered int64
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
	s.Replayed, s.DeadLettered = r.replayed.Load(), r.deadLettered.Load()
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
}

// StreamEvent returns the replayer's stats as a dashboard event, for
// dashboard.Config.Extra:
//
//	dashboard.Config{Extra: func() []any { return []any{rp.StreamEvent()} }}
func (r *Replayer) StreamEvent() QueueEvent {
	s := r.Stats()
	return QueueEvent{Type: "BulwarkQueue", Name: s.Group, Backlog: s.Depth, OldestAgeMs: s.OldestAge.Milliseconds(),
		Replayed: s.Replayed, DeadLettered: s.DeadLettered, DeadLetters: s.DeadLetters}
}
