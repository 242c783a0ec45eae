package queuetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/durable"
)

// Corrupt checks how a backend treats one damaged entry: open returns a
// new, empty queue; damage makes the stored form of pending entry id
// undecodable (the backend's own way). Lease must return it with Reason
// durable.ReasonCorrupt, in its place among the intact entries, never
// fail; DeadLetter must quarantine it as given; DeadLetters must list it;
// Requeue must refuse it with durable.ErrCorrupt; the other entries must
// go on as usual.
func Corrupt(t *testing.T, open func(t *testing.T) durable.Queue, damage func(t *testing.T, q durable.Queue, id string)) {
	q := open(t)
	enqueue(t, q, "k0")
	bad := enqueue(t, q, "k1")
	enqueue(t, q, "k2")
	damage(t, q, bad)

	es := lease(t, q, 10)
	require.Len(t, es, 3, "a damaged entry neither fails Lease nor hides")
	assert.Equal(t, []string{"k0", "k2"}, []string{es[0].Key, es[2].Key})
	c := es[1]
	assert.Equal(t, bad, c.ID)
	assert.Equal(t, durable.ReasonCorrupt, c.Reason)
	assert.NotEmpty(t, c.LastError, "says why it does not decode")
	for _, e := range []durable.Entry{es[0], es[2]} {
		assert.Empty(t, e.Reason)
	}
	st, err := q.Stats(ctx)
	require.NoError(t, err, "a damaged entry does not fail Stats")
	assert.Equal(t, 3, st.Depth)

	c.Deliveries = 0
	require.NoError(t, q.DeadLetter(ctx, c), "a damaged entry is quarantined as it is")
	require.NoError(t, q.Ack(ctx, es[0]))
	assert.Equal(t, []string{"k2"}, keys(lease(t, q, 10)))
	dead, err := q.DeadLetters(ctx)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	assert.Equal(t, bad, dead[0].ID)
	assert.Equal(t, durable.ReasonCorrupt, dead[0].Reason)
	assert.ErrorIs(t, q.Requeue(ctx, bad), durable.ErrCorrupt, "a corrupt entry is never replayed")
	later, err := q.Lease(ctx, time.Now().Add(time.Hour), 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"k2"}, keys(later))
}
