package party_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/circuit/party"
	"github.com/bulwark-go/bulwark/metrics"
)

// gate is a Party that lets every probe through.
type gate struct{}

func (gate) MayProbe() bool { return true }
func (gate) Status() string { return "shared state: ok" }

// TestJoinLookOpenClose: a party joins a breaker, reads it, opens it with
// ReasonOpen and closes it with ReasonClose; a decision taken on a Look
// from before a transition does not apply.
func TestJoinLookOpenClose(t *testing.T) {
	b, err := circuit.New(circuit.Config{Name: "dep", Clock: new(metrics.ManualClock), OpenDuration: time.Minute})
	require.NoError(t, err)
	_, err = party.Join(b, nil)
	require.Error(t, err, "a nil party")
	m, err := party.Join(b, gate{})
	require.NoError(t, err)
	_, err = party.Join(b, gate{})
	require.Error(t, err, "one party at a time")
	assert.Equal(t, "shared state: ok", b.Snapshot().Shared)

	l := m.Look()
	require.Equal(t, circuit.Closed, l.State)
	require.True(t, m.Open(l))
	assert.Equal(t, circuit.Open, b.State())
	ts := b.Snapshot().Transitions
	assert.Equal(t, party.ReasonOpen, ts[len(ts)-1].Reason)
	assert.False(t, m.Open(l), "the breaker moved since l")

	require.True(t, m.Close(m.Look()))
	assert.Equal(t, circuit.Closed, b.State())
	assert.Equal(t, party.ReasonClose, m.Look().LastClose)

	m.Leave()
	assert.False(t, m.Open(m.Look()), "after Leave")
	assert.Empty(t, b.Snapshot().Shared)
}
