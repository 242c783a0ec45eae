package durable_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/durable"
	"github.com/bulwark-go/bulwark/durable/queuetest"
)

// openStore opens a new queue file in t's temporary directory, closed when
// t ends.
func openStore(t *testing.T) *durable.Store {
	t.Helper()
	s, err := durable.OpenStore(filepath.Join(t.TempDir(), "queue.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func TestStoreConformance(t *testing.T) {
	queuetest.Run(t, func(t *testing.T) durable.Queue { return openStore(t) })
}
