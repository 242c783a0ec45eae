package fleet_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/redis/go-redis/v9"
)

// goRedisLog sends go-redis's own log lines to a slog.Logger. go-redis's
// Printf carries no level; the lines it prints by default (its LogLevel is
// errors only) report trouble, hence Warn.
type goRedisLog struct{ logger *slog.Logger }

func (l goRedisLog) Printf(ctx context.Context, format string, v ...any) {
	l.logger.WarnContext(ctx, fmt.Sprintf(format, v...), slog.String("component", "go-redis"))
}

// go-redis logs its own trouble (a pool that cannot dial, say) through
// one process-wide logger, to stderr by default. The fleet logs through
// Config.Logger and leaves go-redis's logger alone, since it belongs to
// every Redis client of the process: set it once in main.
func Example_goRedisLogs() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	redis.SetLogger(goRedisLog{logger})
	// ... fleet.New(fleet.Config{..., Logger: logger}), streamqueue.New, your own clients.
}
