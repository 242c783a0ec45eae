package dashboard

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/fallback"
	"github.com/bulwark-go/bulwark/metrics"
)

// saveOrder is a write whose fallback defers it.
type saveOrder struct{}

func (saveOrder) Name() string                                    { return "Save" }
func (saveOrder) Write() bool                                     { return true }
func (saveOrder) Run(context.Context) (string, error)             { return "", errors.New("down") }
func (saveOrder) Fallback(context.Context, error) (string, error) { return "", command.ErrDeferred }

// defaultList fails and serves a static default.
type defaultList struct{ fallback.Static[string] }

func (defaultList) Name() string                        { return "List" }
func (defaultList) Run(context.Context) (string, error) { return "", errors.New("down") }

// TestStreamReadOnlyAndDegradedKinds: the native event counts the writes
// read-only mode refused and the fallback successes by kind.
func TestStreamReadOnlyAndDegradedKinds(t *testing.T) {
	reg := command.NewRegistry(command.RegistryConfig{Clock: &metrics.ManualClock{}, Logger: slog.New(slog.DiscardHandler)})
	defer reg.Close(context.Background())
	g, err := reg.NewGroup("orders", command.GroupConfig{Strategy: command.Semaphore})
	require.NoError(t, err)
	for range 2 {
		_, err = command.Execute(context.Background(), g, defaultList{})
		require.NoError(t, err)
	}
	reg.SetReadOnly(true)
	for range 3 {
		_, err = command.Execute(context.Background(), g, saveOrder{})
		require.NoError(t, err, "deferred by its fallback")
	}

	_, ts := newTestStream(t, reg, Config{})
	c := openStream(t, newTestClient(), ts.URL)
	defer c.Close()
	f, err := c.sse.frame()
	require.NoError(t, err)
	save := f.find(TypeBulwarkCommand, "Save", "orders")
	require.NotNil(t, save)
	assert.EqualValues(t, 3, num(save["rollingCountReadOnly"]))
	assert.EqualValues(t, 3, num(save["rollingCountDegradedDeferred"]))
	list := f.find(TypeBulwarkCommand, "List", "orders")
	require.NotNil(t, list)
	assert.EqualValues(t, 2, num(list["rollingCountDegradedStatic"]))
	assert.EqualValues(t, 0, num(list["rollingCountReadOnly"]), "a read is never refused")
}
