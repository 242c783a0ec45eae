package durable

import (
	"context"
	"errors"
	"fmt"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// ApplyFunc applies one write to its dependency: at once from a Write's Run,
// later from the Replayer. It must send e.Key with the write so that the
// receiver applies it at most once (see Queue on delivery).
type ApplyFunc func(ctx context.Context, e Entry) error

// Receipt is a Write's result: the write's idempotency key and, when the
// write was deferred, its entry ID in the queue, of which
// StatusHandler.Token makes the token to give the caller (in the Location
// of an HTTP 202 Accepted).
type Receipt struct {
	Key     string
	EntryID string
}

// Write is a command (for command.Execute) that applies a write now and,
// when it cannot (FAILURE, TIMEOUT, short-circuit or rejection), defers it:
// its Fallback stores the write in Queue and returns only once it is
// durable, and the call answers "accepted": Info.Events holds
// metrics.DegradedDeferred and the Receipt carries the entry ID. If the write cannot be stored the call
// fails with an error matching ErrNotAccepted (and the cause): a caller is
// never told accepted for a write that was not stored. A Replayer applies
// deferred writes later.
//
// The enqueue runs as the group's fallback, under its FallbackLimit
// (default 10 at once): past it a write is refused (FALLBACK_REJECTION,
// not accepted). Each enqueue waits for an fsync or a Redis round trip,
// so a group that may defer many writes at once needs a higher limit.
//
//	r, info, err := command.ExecuteInfo(ctx, orders, durable.Write{
//		Command: "createOrder", Key: requestID, Payload: body, Apply: createOrder, Queue: q})
//	switch {
//	case err != nil: // not applied, not accepted: 503
//	case info.Events.Has(metrics.DegradedDeferred): // 202 Accepted, Location: its status, status.Token(r)
//	default: // 201 Created
//	}
type Write struct {
	// Command is the command's name; replays run under it too. Required.
	Command string
	// Key is the idempotency key (the request ID). Required.
	Key string
	// Payload is the serialised write, handed to Apply.
	Payload []byte
	// Apply applies the write. Required.
	Apply ApplyFunc
	// Queue stores the write when it cannot be applied now. Required.
	Queue Queue
}

// Name returns w.Command: the command's name (command.Namer).
func (w Write) Name() string { return w.Command }

// Run applies the write now. A Write without Name, Key, Apply or Queue is
// a BAD_REQUEST wrapping ErrInvalidEntry.
func (w Write) Run(ctx context.Context) (Receipt, error) {
	if err := w.check(); err != nil {
		return Receipt{}, command.BadRequest(err)
	}
	return Receipt{Key: w.Key}, w.Apply(ctx, Entry{Key: w.Key, Command: w.Command, Payload: w.Payload})
}

// Fallback stores the write in the queue and answers accepted (an error
// matching command.ErrDeferred, which Execute turns into a nil error and
// DEGRADED_DEFERRED in Info.Events), or fails with ErrNotAccepted if it could not be stored.
func (w Write) Fallback(ctx context.Context, cause error) (Receipt, error) {
	if err := w.check(); err != nil {
		return Receipt{}, fmt.Errorf("%w: %w", ErrNotAccepted, err)
	}
	e := Entry{Key: w.Key, Command: w.Command, Payload: w.Payload}
	var ce *command.Error
	if errors.As(cause, &ce) {
		e.Group = ce.Group
		if ce.Event == metrics.Failure || ce.Event == metrics.Timeout {
			e.Deliveries = 1 // Run began: the write may have reached the receiver
		}
	}
	// The caller may leave, but a write half-accepted is worse than a
	// late answer: the enqueue finishes regardless of ctx's end.
	id, err := w.Queue.Enqueue(context.WithoutCancel(ctx), e)
	if err != nil {
		return Receipt{}, fmt.Errorf("%w: %w", ErrNotAccepted, err)
	}
	return Receipt{Key: w.Key, EntryID: id}, fmt.Errorf("durable: write %q stored as entry %s: %w", w.Key, id, command.ErrDeferred)
}

// check reports a Write missing a required field.
func (w Write) check() error {
	switch {
	case w.Command == "":
		return fmt.Errorf("%w: Write.Command is empty", ErrInvalidEntry)
	case w.Apply == nil:
		return fmt.Errorf("%w: Write.Apply is nil", ErrInvalidEntry)
	case w.Queue == nil:
		return fmt.Errorf("%w: Write.Queue is nil", ErrInvalidEntry)
	}
	return Entry{Key: w.Key}.Validate()
}
