package alert

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// BenchmarkCheck is one evaluation of 1,000 groups of one command each, called once:
// busy while the call is in their window (a snapshot each), quiet once the window has passed
// (the quiet test each, the one Watch gets). At the default Interval of 1 s, 10 ms per Check is 1% of a core.
func BenchmarkCheck(b *testing.B) {
	for _, state := range []string{"busy", "quiet"} {
		b.Run(state, func(b *testing.B) {
			clock := new(metrics.ManualClock)
			reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
			defer func() { _ = reg.Close(context.Background()) }()
			w := newWatcher(b, Config{Interval: time.Hour})
			for i := range 1000 {
				g, err := reg.NewGroup(fmt.Sprintf("g%04d", i), command.GroupConfig{Strategy: command.Semaphore, Alerts: w})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := command.Execute(context.Background(), g, succeeding("dep")); err != nil {
					b.Fatal(err)
				}
			}
			if state == "quiet" {
				clock.Advance(11 * time.Second)
			}
			b.ReportAllocs()
			for b.Loop() {
				w.Check()
			}
		})
	}
}
