package bench

import (
	"fmt"
	"os"
	"sync"
	"testing"

	sentinel "github.com/alibaba/sentinel-golang/api"
	"github.com/alibaba/sentinel-golang/core/config"
)

// sentinelDir holds sentinel's logs; TestMain removes it.
var sentinelDir string

// startSentinel starts sentinel-golang once per process, with its logs in sentinelDir. Only the
// sentinel case calls it, so its background collectors run in no other case's process (sentinel
// keeps global state and background tasks; it cannot be stopped).
var startSentinel = sync.OnceValue(func() error {
	dir, err := os.MkdirTemp("", "bulwark-bench-sentinel-")
	if err != nil {
		return fmt.Errorf("sentinel log dir: %w", err)
	}
	sentinelDir = dir
	cfg := config.NewDefaultConfig()
	cfg.Sentinel.Log.Dir = dir
	if err := sentinel.InitWithConfig(cfg); err != nil {
		return fmt.Errorf("sentinel init: %w", err)
	}
	return nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if sentinelDir != "" {
		_ = os.RemoveAll(sentinelDir)
	}
	os.Exit(code)
}
