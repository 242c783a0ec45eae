package prom_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/prom"
)

type getUser struct{}

func (getUser) Run(context.Context) (string, error) { return "ada", nil }

// Export a registry's groups and commands to Prometheus. A server would
// serve pr with promhttp.HandlerFor(pr, promhttp.HandlerOpts{}) at
// /metrics; here one family is printed.
func ExampleNew() {
	reg := command.NewRegistry(command.RegistryConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer reg.Close(context.Background())
	users, err := reg.NewGroup("users", command.GroupConfig{Strategy: command.Semaphore})
	if err != nil {
		panic(err)
	}
	for range 3 {
		_, _ = command.Execute(context.Background(), users, getUser{})
	}

	c, err := prom.New(reg)
	if err != nil {
		panic(err)
	}
	pr := prometheus.NewRegistry()
	pr.MustRegister(c)

	fams, err := pr.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range fams {
		if strings.HasSuffix(f.GetName(), "calls_total") {
			_, _ = expfmt.MetricFamilyToText(os.Stdout, f)
		}
	}
	fmt.Println("families:", len(fams))
	// Output:
	// # HELP bulwark_command_calls_total Callers' calls since the command was created: attempts (one primary outcome each) less retried ones.
	// # TYPE bulwark_command_calls_total counter
	// bulwark_command_calls_total{command="getUser",group="users"} 3
	// families: 19
}

// Export deferred-write queues' figures. With module durable, the
// function returns one QueueStats per replayer from Replayer.Stats (see
// QueueCollector); here the figures are fixed.
func ExampleNewQueues() {
	q, err := prom.NewQueues(func() []prom.QueueStats {
		return []prom.QueueStats{{Group: "orders", Backlog: 12, OldestAge: 1500 * time.Millisecond, Replayed: 40}}
	})
	if err != nil {
		panic(err)
	}
	pr := prometheus.NewRegistry()
	pr.MustRegister(q)
	fams, err := pr.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range fams {
		if strings.Contains(f.GetName(), "backlog") || strings.Contains(f.GetName(), "oldest") {
			_, _ = expfmt.MetricFamilyToText(os.Stdout, f)
		}
	}
	// Output:
	// # HELP bulwark_queue_backlog Pending entries in the group's deferred-write queue.
	// # TYPE bulwark_queue_backlog gauge
	// bulwark_queue_backlog{group="orders"} 12
	// # HELP bulwark_queue_oldest_age_seconds How long the oldest pending entry of the queue has waited (0 when empty).
	// # TYPE bulwark_queue_oldest_age_seconds gauge
	// bulwark_queue_oldest_age_seconds{group="orders"} 1.5
}
