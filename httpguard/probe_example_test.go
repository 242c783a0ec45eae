package httpguard_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/httpguard"
	"github.com/bulwark-go/bulwark/metrics"
)

// ProbeReachable closes a host's breaker on a probe that got any answer,
// even a 500; the probe carries X-Breaker-Probe: 1 for the host's logs.
func ExampleProbeReachable() {
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("host: %s probe=%q\n", r.Method, r.Header.Get(httpguard.ProbeHeader))
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer host.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()

	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	defer reg.Close(context.Background())
	transport, err := httpguard.NewTransport(reg, httpguard.Config{Base: base, Group: command.GroupConfig{
		CommandBreaker:  circuit.Config{MinRequests: 1, OpenDuration: 5 * time.Second, HalfOpenSuccesses: 1},
		ProbeClassifier: httpguard.ProbeReachable,
	}})
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: transport}
	for range 2 {
		resp, err := client.Get(host.URL)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		g, _ := transport.Group(resp.Request.URL)
		b, _ := g.CommandBreaker(http.MethodGet)
		fmt.Println("caller:", resp.StatusCode, "breaker:", b.State())
		clock.Advance(5 * time.Second)
	}
	// Output:
	// host: GET probe=""
	// caller: 500 breaker: open
	// host: GET probe="1"
	// caller: 500 breaker: closed
}
