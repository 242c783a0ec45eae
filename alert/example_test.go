package alert_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/bulwark-go/bulwark/alert"
	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// charge is the examples' command, failing as a dependency that is down.
var charge = command.Func("charge", func(ctx context.Context) (int, error) {
	return 0, errors.New("dial tcp 10.0.0.7:443: connection refused")
}, nil)

// payments returns the examples' group, watched by w, on a manual clock,
// whose command breaker trips on one failure; closeAll closes its
// registry.
func payments(w *alert.Watcher) (g *command.Group, clock *metrics.ManualClock, closeAll func()) {
	clock = new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	g, err := reg.NewGroup("payments", command.GroupConfig{
		Strategy:       command.Semaphore,
		CommandBreaker: circuit.Config{MinRequests: 1, OpenDuration: time.Hour},
		Alerts:         w,
	})
	if err != nil {
		panic(err)
	}
	return g, clock, func() { _ = reg.Close(context.Background()) }
}

// Alerts: a breaker open for a minute is a P3, for ten minutes a P2; each
// alert carries the trip's reason, window and error samples.
func Example() {
	w, err := alert.New(alert.Config{Interval: time.Hour, OnAlert: func(a alert.Alert) {
		fmt.Printf("%s %s %s/%s open %v (%s, %d of %d failed) errors %q\n",
			a.Kind, a.Tier, a.Group, a.Command, a.OpenFor, a.Reason, a.Health.Failures, a.Health.Requests, a.Errors[0].Err)
	}})
	if err != nil {
		panic(err)
	}
	g, clock, closeAll := payments(w)
	_, _ = command.Execute(context.Background(), g, charge)
	for range 10 {
		clock.Advance(time.Minute)
		w.Check() // the watcher's goroutine does this every Interval; here the clock is manual
	}
	closeAll() // closing the group ends what still fires (Alert.Unwatched)
	// Output:
	// breaker_open P3 payments/charge open 1m0s (error_ratio, 1 of 1 failed) errors "dial tcp 10.0.0.7:443: connection refused"
	// breaker_open P2 payments/charge open 10m0s (error_ratio, 1 of 1 failed) errors "dial tcp 10.0.0.7:443: connection refused"
	// breaker_resolved P2 payments/charge open 10m0s (error_ratio, 1 of 1 failed) errors "dial tcp 10.0.0.7:443: connection refused"
}

// requestIDKey is where the example's HTTP middleware would keep the
// request ID.
type requestIDKey struct{}

// A Webhook posts alerts to an Alertmanager (here a stand-in receiver):
// the tier is the severity label, and the annotations say what to do and
// quote the last errors with their request IDs.
func ExampleWebhook() {
	got := make(chan []byte, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- body
	}))
	defer receiver.Close()
	hook, err := alert.NewWebhook(alert.WebhookConfig{
		URL:    receiver.URL + "/api/v2/alerts",
		Labels: map[string]string{"instance": "checkout-1:8080"},
	})
	if err != nil {
		panic(err)
	}
	defer hook.Close(context.Background())
	w, err := alert.New(alert.Config{
		OnAlert: hook.OnAlert,
		RequestID: func(ctx context.Context) string {
			id, _ := ctx.Value(requestIDKey{}).(string)
			return id
		},
	})
	if err != nil {
		panic(err)
	}
	g, clock, closeAll := payments(w)
	defer closeAll()
	ctx := context.WithValue(context.Background(), requestIDKey{}, "7f3a9c")
	_, _ = command.Execute(ctx, g, charge)
	clock.Advance(time.Minute)
	w.Check()

	var alerts []struct {
		Labels           map[string]string `json:"labels"`
		Annotations      map[string]string `json:"annotations"`
		StartsAt, EndsAt time.Time
	}
	body := <-got
	if err := json.Unmarshal(body, &alerts); err != nil {
		panic(err)
	}
	out, _ := json.MarshalIndent(map[string]any{"labels": alerts[0].Labels, "annotations": alerts[0].Annotations}, "", "  ")
	fmt.Println(string(out))
	fmt.Println("startsAt", -time.Until(alerts[0].StartsAt).Round(time.Second), "ago, endsAt in", time.Until(alerts[0].EndsAt).Round(time.Second))
	// Output:
	// {
	//   "annotations": {
	//     "action": "check the health of dependency payments (command charge); breaker open for 1 min, reason error_ratio: 1 of 1 calls failed or timed out",
	//     "errors": "request 7f3a9c: dial tcp 10.0.0.7:443: connection refused",
	//     "summary": "Breaker of payments/charge not closed for 1 min"
	//   },
	//   "labels": {
	//     "alertname": "BulwarkCommandCircuitOpen",
	//     "command": "charge",
	//     "group": "payments",
	//     "instance": "checkout-1:8080",
	//     "severity": "P3"
	//   }
	// }
	// startsAt 1m0s ago, endsAt in 4m0s
}
