package bench

import (
	"fmt"
	"os"
	"testing"

	sentinel "github.com/alibaba/sentinel-golang/api"
	"github.com/alibaba/sentinel-golang/core/config"
)

// TestMain starts sentinel-golang once for the whole package, with its logs in a temp dir that is
// removed afterwards (sentinel keeps global state and background tasks; it cannot be stopped).
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bulwark-bench-sentinel-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "sentinel log dir:", err)
		os.Exit(1)
	}
	cfg := config.NewDefaultConfig()
	cfg.Sentinel.Log.Dir = dir
	if err := sentinel.InitWithConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "sentinel init:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
