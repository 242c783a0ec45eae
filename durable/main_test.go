package durable_test

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/durable/queuetest"
	"github.com/bulwark-go/bulwark/internal/logtest"
)

// TestMain runs a crash-test child when asked to (see crash_test.go), else
// the tests, checking that none leaves a goroutine behind. IgnoreCurrent
// skips the goroutines ants' package init starts for its default pool.
func TestMain(m *testing.M) {
	if os.Getenv(fillEnv) != "" {
		os.Exit(runFill())
	}
	if code, ok := queuetest.Child(openFromEnv); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

// newGroup returns a Semaphore group in a new registry closed with t, and
// the buffer its log records go to.
func newGroup(t *testing.T) (*command.Group, *logtest.Buffer) {
	t.Helper()
	logs := new(logtest.Buffer)
	reg := command.NewRegistry(command.RegistryConfig{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("orders", command.GroupConfig{Strategy: command.Semaphore})
	require.NoError(t, err)
	return g, logs
}
