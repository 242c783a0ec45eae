package durable_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/durable"
	"github.com/bulwark-go/bulwark/metrics"
)

var errDown = errors.New("backend down")

func failing(context.Context, durable.Entry) error { return errDown }

func TestWriteAppliedNowIsNotDeferred(t *testing.T) {
	g, _ := newGroup(t)
	q := openStore(t)
	var got []durable.Entry
	apply := func(_ context.Context, e durable.Entry) error { got = append(got, e); return nil }
	r, info, err := command.ExecuteInfo(context.Background(), g, durable.Write{Command: "createOrder", Key: "req-1", Payload: []byte("o1"), Apply: apply, Queue: q})
	require.NoError(t, err)
	assert.False(t, info.Events.Has(metrics.DegradedDeferred))
	assert.Equal(t, durable.Receipt{Key: "req-1"}, r)
	assert.Equal(t, "createOrder", info.Command)
	require.Len(t, got, 1)
	assert.Equal(t, "req-1", got[0].Key)
	assert.Equal(t, []byte("o1"), got[0].Payload)
	st, err := q.Stats(context.Background())
	require.NoError(t, err)
	assert.Zero(t, st.Depth)
}

func TestWriteDeferredWhenDependencyFailsOrIsRefused(t *testing.T) {
	g, _ := newGroup(t)
	q := openStore(t)
	ctx := context.Background()
	r, info, err := command.ExecuteInfo(ctx, g, durable.Write{Command: "createOrder", Key: "req-1", Payload: []byte("o1"), Apply: failing, Queue: q})
	require.NoError(t, err)
	assert.True(t, info.Events.Has(metrics.DegradedDeferred))
	assert.Equal(t, metrics.Failure, info.Event)
	assert.NotEmpty(t, r.EntryID)

	g.Breaker().SetMode(circuit.ForcedOpen)
	called := false
	r2, info, err := command.ExecuteInfo(ctx, g, durable.Write{Command: "createOrder", Key: "req-2", Payload: []byte("o2"),
		Apply: func(context.Context, durable.Entry) error { called = true; return nil }, Queue: q})
	require.NoError(t, err)
	assert.False(t, called)
	assert.Equal(t, metrics.ShortCircuited, info.Event)
	assert.True(t, info.Events.Has(metrics.DegradedDeferred))

	es, err := q.Lease(ctx, time.Now(), 10)
	require.NoError(t, err)
	require.Len(t, es, 2)
	assert.Equal(t, []string{r.EntryID, r2.EntryID}, []string{es[0].ID, es[1].ID})
	assert.Equal(t, durable.Entry{ID: r.EntryID, Key: "req-1", Group: "orders", Command: "createOrder", Payload: []byte("o1"), EnqueuedAt: es[0].EnqueuedAt,
		Deliveries: 1}, es[0], "the call's Run may have reached the receiver")
	assert.Zero(t, es[1].Deliveries, "a short-circuited call never left")
}

// A write that cannot be stored is never reported accepted.
func TestWriteNotAcceptedWhenQueueFails(t *testing.T) {
	g, _ := newGroup(t)
	q := openStore(t)
	require.NoError(t, q.Close())
	_, info, err := command.ExecuteInfo(context.Background(), g, durable.Write{Command: "createOrder", Key: "req-1", Apply: failing, Queue: q})
	assert.ErrorIs(t, err, durable.ErrNotAccepted)
	assert.ErrorIs(t, err, durable.ErrClosed)
	assert.ErrorIs(t, err, errDown)
	assert.False(t, info.Events.Has(metrics.DegradedDeferred))
	assert.False(t, info.Degraded)
}

func TestWriteWithoutKeyIsRefused(t *testing.T) {
	g, _ := newGroup(t)
	q := openStore(t)
	_, info, err := command.ExecuteInfo(context.Background(), g, durable.Write{Command: "createOrder", Apply: failing, Queue: q})
	assert.ErrorIs(t, err, durable.ErrInvalidEntry)
	assert.Equal(t, metrics.BadRequest, info.Event)

	g.Breaker().SetMode(circuit.ForcedOpen)
	_, info, err = command.ExecuteInfo(context.Background(), g, durable.Write{Command: "createOrder", Apply: failing, Queue: q})
	assert.ErrorIs(t, err, durable.ErrNotAccepted)
	assert.ErrorIs(t, err, durable.ErrInvalidEntry)
	assert.False(t, info.Events.Has(metrics.DegradedDeferred))
}
