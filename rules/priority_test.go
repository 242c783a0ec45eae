package rules

import (
	"context"
	"testing"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/priority"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPriorityKey: "priority" in a rules document turns on a group's
// priority shedding live, a bad share or name is refused naming the field,
// and dropping the key brings the group back to its baseline.
func TestPriorityKey(t *testing.T) {
	reg := newRegistry(t)
	g, err := reg.NewGroup("orders", command.GroupConfig{Strategy: command.Semaphore, MaxConcurrent: 4})
	require.NoError(t, err)
	m := newManager(t, reg)

	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"orders": {"priority": {"reserve": [0, 0.25, 0.5, 0.75], "default": "P2"}}}}`)))
	assert.Equal(t, priority.Config{Reserve: [4]float64{0, 0.25, 0.5, 0.75}, Default: priority.P2}, g.Config().Priority)

	// With 4 slots and P3's reserve 0.75, a P3 call is shed once one slot is held.
	held := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := command.Execute(t.Context(), g, command.Func("hold", func(ctx context.Context) (int, error) {
			close(held)
			<-release
			return 1, nil
		}, nil), command.WithPriority(priority.P0))
		done <- err
	}()
	<-held
	_, err = command.Execute(t.Context(), g, command.Func("report", func(context.Context) (int, error) { return 1, nil }, nil),
		command.WithPriority(priority.P3))
	assert.ErrorIs(t, err, command.ErrRefused, "the rule's reserve is in force")
	close(release)
	require.NoError(t, <-done)

	for doc, want := range map[string]string{
		`{"groups": {"orders": {"priority": {"default": "P4"}}}}`:                    `priority.default "P4"`,
		`{"groups": {"orders": {"priority": {"reserve": [0.1, 0.2, 0.3, 0.4]}}}}`:    "Priority.Reserve[0] 0.1",
		`{"groups": {"orders": {"priority": {"reserve": [0, 0.5, 0.25, 0.75]}}}}`:    "Priority.Reserve[2] 0.25",
		`{"groups": {"orders": {"priority": {"reserve": [0, 0.1, 0.2, 0.3, 0.4]}}}}`: "priority.reserve has 5 shares",
		`{"groups": {"orders": {"priority": {"reserve": [0, 0.5]}}}}`:                "priority.reserve has 2 shares",
	} {
		err := m.ApplyJSON([]byte(doc))
		require.ErrorIs(t, err, ErrInvalid, doc)
		assert.ErrorContains(t, err, want, doc)
		assert.ErrorContains(t, err, "orders", doc)
		assert.Equal(t, priority.P2, g.Config().Priority.Default, "a refused document changes nothing")
	}

	require.NoError(t, m.ApplyJSON([]byte(`{"groups": {"orders": {}}}`)))
	assert.Equal(t, priority.Config{}, g.Config().Priority, "back to the baseline: off")
}
