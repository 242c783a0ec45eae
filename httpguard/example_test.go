package httpguard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/httpguard"
)

// ExampleTransport: a host that answers 503 is passed through (the caller
// reads the upstream's status, body and Retry-After) while its breaker
// counts the failures; once it is open, the Transport answers at once with
// a degraded 503 of its own.
func ExampleTransport() {
	dependency := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	defer dependency.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()

	reg := command.NewRegistry(command.RegistryConfig{})
	defer reg.Close(context.Background())
	transport, err := httpguard.NewTransport(reg, httpguard.Config{
		Base:    base,
		Degrade: true,
		Group:   command.GroupConfig{Breaker: circuit.Config{MinRequests: 3, OpenDuration: 10 * time.Second}},
	})
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: transport}

	for range 4 { // the fourth finds the host's breaker open
		resp, err := client.Get(dependency.URL)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if reason := resp.Header.Get("X-Degraded"); reason != "" {
			fmt.Printf("%d Retry-After %s, degraded: %s\n", resp.StatusCode, resp.Header.Get("Retry-After"), reason)
		} else {
			fmt.Printf("%d Retry-After %s, from the host: %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	// Output:
	// 503 Retry-After 30, from the host: overloaded
	// 503 Retry-After 30, from the host: overloaded
	// 503 Retry-After 30, from the host: overloaded
	// 503 Retry-After 10, degraded: short_circuited
}
