package isolation

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Importing ants starts the two goroutines of its package-level default pool; they are
// there before any test runs, so IgnoreCurrent leaves them out of the check.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

func TestEndErrorsMatchKindAndCause(t *testing.T) {
	cases := []struct {
		err         error
		kind, cause error
	}{
		{detached(context.DeadlineExceeded), ErrDetached, context.DeadlineExceeded},
		{detached(context.Canceled), ErrDetached, context.Canceled},
		{dropped(context.DeadlineExceeded), ErrDropped, context.DeadlineExceeded},
		{dropped(context.Canceled), ErrDropped, context.Canceled},
		{dropped(io.EOF), ErrDropped, io.EOF},
		{detached(io.EOF), ErrDetached, io.EOF},
		{errDroppedClosed, ErrDropped, ErrClosed},
	}
	for _, c := range cases {
		assert.ErrorIs(t, c.err, c.kind)
		assert.ErrorIs(t, c.err, c.cause)
		assert.Contains(t, c.err.Error(), c.kind.Error())
		assert.Contains(t, c.err.Error(), c.cause.Error())
	}
	assert.NotErrorIs(t, detached(context.Canceled), ErrDropped)
	assert.NotErrorIs(t, dropped(context.Canceled), ErrDetached)
	assert.NotErrorIs(t, detached(context.Canceled), context.DeadlineExceeded)
}

func TestEndErrorsDoNotAllocate(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		_ = detached(context.DeadlineExceeded)
		_ = detached(context.Canceled)
		_ = dropped(context.DeadlineExceeded)
		_ = dropped(context.Canceled)
	})
	assert.Zero(t, allocs)
}

func TestPanicErrorUnwrapsErrorValues(t *testing.T) {
	pe := NewPanicError(io.ErrUnexpectedEOF)
	assert.ErrorIs(t, pe, io.ErrUnexpectedEOF)
	assert.Equal(t, "isolation: work panicked: unexpected EOF", pe.Error())
	assert.Contains(t, string(pe.Stack), "NewPanicError")

	assert.NoError(t, NewPanicError("boom").Unwrap())
}

func TestCloseErrorSaysWhatWasCutOff(t *testing.T) {
	err := error(&CloseError{Dropped: 3, Running: 2, Err: context.DeadlineExceeded})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, "isolation: close cut off: 3 queued calls dropped, 2 calls still running: "+
		"context deadline exceeded", err.Error())
	var ce *CloseError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, 3, ce.Dropped)
}
