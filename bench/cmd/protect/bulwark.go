package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/fallback"
	"github.com/bulwark-go/bulwark/metrics"
)

func bulwarkProtections() []func() protection {
	return []func() protection{bulwarkProtection, bulwarkPreset}
}

// presetName is the name of the protection that runs the "dependency" preset.
const presetName = "bulwark (preset)"

// backendCmd is the bulwark command of one endpoint: Run calls the backend route; the embedded
// Static answers the fallback.
type backendCmd struct {
	fallback.Static[struct{}]
	name string
	do   func(context.Context) error
}

func (c *backendCmd) Name() string { return c.name }

func (c *backendCmd) Run(ctx context.Context) (struct{}, error) { return struct{}{}, c.do(ctx) }

// bulwarkProtection: one group per endpoint (one per backend route): a goroutine pool of
// bulkheadSize with no queue, the call timeout, group and command breakers with the common
// settings, and a static fallback.
func bulwarkProtection() protection {
	window := metrics.Window{Length: breakerWindow, Buckets: 10}
	breaker := circuit.Config{
		Window:            window,
		MinRequests:       minRequests,
		FailureRatio:      failureRatio,
		OpenDuration:      openDuration,
		HalfOpenSuccesses: halfOpenSuccesses,
	}
	return bulwarkGroups("bulwark (pool)", command.GroupConfig{
		Window:         window,
		Breaker:        breaker,
		CommandBreaker: breaker,
	})
}

// bulwarkPreset: the recommended configuration, the "dependency" preset, with the scenario's
// timeout and bulkhead.
func bulwarkPreset() protection {
	cfg, err := command.Preset("dependency")
	p := bulwarkGroups(presetName, cfg)
	if err != nil {
		p.wrap = func(string, func(context.Context) error) (call, error) { return nil, err }
	}
	return p
}

// bulwarkGroups runs each endpoint in its own group of cfg, with a goroutine pool of bulkheadSize
// and no queue, the call timeout, and a static fallback.
func bulwarkGroups(name string, cfg command.GroupConfig) protection {
	reg := command.NewRegistry(command.RegistryConfig{Logger: slog.New(slog.DiscardHandler)})
	cfg.Strategy, cfg.MaxConcurrent, cfg.Timeout = command.Thread, bulkheadSize, callTimeout
	return protection{
		name: name,
		wrap: func(endpoint string, do func(context.Context) error) (call, error) {
			g, err := reg.NewGroup(endpoint, cfg)
			if err != nil {
				return nil, err
			}
			cmd := &backendCmd{name: endpoint, do: do}
			return func(ctx context.Context) answer {
				_, info, err := command.ExecuteInfo[struct{}](ctx, g, cmd)
				if err != nil {
					return answer{reason: reasonOf(info.Event), err: err}
				}
				if info.Degraded {
					return answer{fallback: true, reason: reasonOf(info.Event)}
				}
				return answer{}
			}, nil
		},
		closeAll: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = reg.Close(ctx)
		},
	}
}

func reasonOf(e metrics.Event) string {
	switch e {
	case metrics.Success:
		return ""
	case metrics.ShortCircuited:
		return reasonShortCircuit
	case metrics.ThreadPoolRejected, metrics.SemaphoreRejected:
		return reasonRejected
	case metrics.Timeout:
		return reasonTimeout
	}
	return reasonError
}
