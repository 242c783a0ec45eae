package prom

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/internal/cputime"
)

// BenchmarkCollectGather measures one scrape (Collect and Gather, as
// promhttp does) of a registry of 10 groups holding n commands in all, each
// called once, lean (the default) and WithDetail. cpu-ms/op is the
// process's CPU time per scrape, which a shared machine's load does not
// inflate.
//
//	go test -run '^$' -bench CollectGather -benchtime 5x ./
func BenchmarkCollectGather(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		reg := command.NewRegistry(command.RegistryConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		b.Cleanup(func() { require.NoError(b, reg.Close(context.Background())) })
		var groups []*command.Group
		for i := range 10 {
			g, err := reg.NewGroup(fmt.Sprintf("g%d", i), command.GroupConfig{Strategy: command.Semaphore, MaxCommands: n})
			require.NoError(b, err)
			groups = append(groups, g)
		}
		for i := range n {
			_, err := command.Execute(context.Background(), groups[i%10], testCmd{name: fmt.Sprintf("c%d", i)})
			require.NoError(b, err)
		}
		for _, mode := range []struct {
			name string
			opts []Option
		}{{"lean", nil}, {"detail", []Option{WithDetail()}}} {
			c, err := New(reg, mode.opts...)
			require.NoError(b, err)
			pr := prometheus.NewRegistry()
			require.NoError(b, pr.Register(c))
			b.Run(fmt.Sprintf("commands=%d/%s", n, mode.name), func(b *testing.B) {
				b.ReportAllocs()
				series := 0
				var cpu time.Duration
				for b.Loop() {
					start := cputime.Used(b)
					fams, err := pr.Gather()
					cpu += cputime.Used(b) - start
					require.NoError(b, err)
					series = 0
					for _, f := range fams {
						series += len(f.GetMetric())
					}
				}
				b.ReportMetric(float64(series)/float64(n), "metrics/command")
				b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
			})
		}
	}
}
