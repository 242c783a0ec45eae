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

// newGroup returns a group "orders" (of cfg, else a Semaphore group) in a
// new registry closed with t, and the buffer its log records go to.
func newGroup(t *testing.T, cfg ...command.GroupConfig) (*command.Group, *logtest.Buffer) {
	t.Helper()
	logs := new(logtest.Buffer)
	reg := command.NewRegistry(command.RegistryConfig{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	gc := command.GroupConfig{Strategy: command.Semaphore}
	if len(cfg) > 0 {
		gc = cfg[0]
	}
	g, err := reg.NewGroup("orders", gc)
	require.NoError(t, err)
	return g, logs
}
