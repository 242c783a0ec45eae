package command

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/logtest"
)

// recordingExporter records the registry's calls; Export fails for the
// group refuse, ExportCommand for the command refuse.
type recordingExporter struct {
	mu    sync.Mutex
	calls []string
}

func (e *recordingExporter) note(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, s)
}

func (e *recordingExporter) Export(g *Group) error {
	e.note("export " + g.Name())
	if g.Name() == "refuse" {
		return errors.New("name taken")
	}
	return nil
}

func (e *recordingExporter) ExportCommand(g *Group, command string) error {
	e.note("command " + g.Name() + "/" + command)
	if command == "refuse" {
		return errors.New("name taken")
	}
	return nil
}

func (e *recordingExporter) Unexport(g *Group) { e.note("unexport " + g.Name()) }

// TestExporterHooks: a group is exported at creation (a failed export
// refuses it), each command as it is created (a failed export is logged
// and the command runs), and unexported by Close.
func TestExporterHooks(t *testing.T) {
	e := &recordingExporter{}
	var logs logtest.Buffer
	reg := NewRegistry(RegistryConfig{Exporter: e, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer reg.Close(context.Background())

	_, err := reg.NewGroup("refuse", GroupConfig{Strategy: Semaphore})
	require.ErrorContains(t, err, "name taken")
	_, found := reg.Group("refuse")
	assert.False(t, found)

	g, err := reg.NewGroup("deps", GroupConfig{Strategy: Semaphore, Commands: map[string]CommandConfig{"declared": {}}})
	require.NoError(t, err)
	_, err = Execute(context.Background(), g, op[int]{"refuse", succeed(1)})
	require.NoError(t, err, "a command whose export failed still runs")
	assert.Contains(t, logs.String(), "command metrics not exported")
	require.NoError(t, g.Close(context.Background()))
	assert.Equal(t, []string{"export refuse", "export deps", "command deps/declared", "command deps/refuse", "unexport deps"}, e.calls)
}
