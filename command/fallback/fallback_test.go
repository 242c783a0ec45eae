package fallback

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/metrics"
)

func TestLastGood(t *testing.T) {
	_, err := NewLastGood[int](0, nil)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	clock := new(metrics.ManualClock)
	lg, err := NewLastGood[int](time.Second, clock)
	require.NoError(t, err)
	_, err = lg.Fallback(context.Background(), errors.New("boom"))
	assert.ErrorIs(t, err, ErrNoLastGood)
	lg.Store(4)
	clock.Advance(time.Second)
	v, err := lg.Fallback(context.Background(), errors.New("boom"))
	require.NoError(t, err)
	assert.Equal(t, 4, v, "at exactly the maximum age: still served")
	clock.Advance(time.Nanosecond)
	v, err = lg.Fallback(context.Background(), errors.New("boom"))
	assert.ErrorIs(t, err, ErrStale)
	assert.Zero(t, v)
	v, age, ok := lg.Load()
	assert.Equal(t, 4, v)
	assert.Equal(t, time.Second+time.Nanosecond, age)
	assert.True(t, ok)
	assert.Equal(t, time.Second, lg.MaxAge())
}

func TestLastGoodConcurrent(t *testing.T) {
	lg, err := NewLastGood[[2]int](time.Hour, nil)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10_000 {
			lg.Store([2]int{i, -i})
		}
	}()
	for range 10_000 {
		if v, _, ok := lg.Load(); ok {
			require.Equal(t, v[0], -v[1], "a value is never torn")
		}
	}
	<-done
}
