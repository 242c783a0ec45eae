package isolation

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPoolShrinkRefusesASlotTakenOnTheOldSize: a caller that found a slot
// free under the old size, then took it after a Resize had shrunk the pool
// to the slots already held, ran above the new size once the shrink looked
// drained (command's TestResizeNeverExceedsBound saw it under load). The
// slot must be given back and the call refused.
func TestPoolShrinkRefusesASlotTakenOnTheOldSize(t *testing.T) {
	p, err := NewPool(PoolConfig{Size: 4})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	require.True(t, p.acquire(false))
	require.True(t, p.acquire(false))
	var armed atomic.Bool
	armed.Store(true)
	p.raceHook = func(at racePoint) {
		if at == sizeRead && armed.CompareAndSwap(true, false) {
			require.NoError(t, p.Resize(2, 0))
			require.Equal(t, 2, p.Stats().Active) // drained: no slot above the new size
		}
	}
	took := p.acquire(false)
	p.raceHook = nil
	assert.False(t, took, "a slot was taken above the size a finished Resize set")
	assert.Equal(t, 2, p.Stats().Active)
	if took {
		p.slots.Add(-1)
	}
	p.slots.Add(-2)
}
