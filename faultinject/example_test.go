package faultinject_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/faultinject"
	"github.com/bulwark-go/bulwark/metrics"
)

// getProfile is a command that degrades to a guest profile.
type getProfile struct{ id int }

func (getProfile) Run(ctx context.Context) (string, error) { return "Ada", nil }

func (getProfile) Fallback(ctx context.Context, err error) (string, error) { return "guest", nil }

func ExampleCommand() {
	reg := command.NewRegistry(command.RegistryConfig{})
	defer reg.Close(context.Background())
	profiles, err := reg.NewGroup("profiles", command.GroupConfig{Strategy: command.Semaphore})
	if err != nil {
		panic(err)
	}
	faults, err := faultinject.New(faultinject.Config{ErrorShare: 1})
	if err != nil {
		panic(err)
	}
	cmd := faultinject.Command(getProfile{id: 7}, faults)

	for _, step := range []string{"before", "drill", "after"} {
		switch step {
		case "drill":
			faults.Enable()
		case "after":
			faults.Disable()
		}
		name, info, err := command.ExecuteInfo(context.Background(), profiles, cmd)
		fmt.Println(step, name, err, info.Command, info.Events)
	}
	// Output:
	// before Ada <nil> getProfile SUCCESS
	// drill guest <nil> getProfile FAILURE|FALLBACK_SUCCESS
	// after Ada <nil> getProfile SUCCESS
}

func ExampleNewTransport() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello")
	}))
	defer srv.Close()
	faults, err := faultinject.New(faultinject.Config{ServerErrorShare: 1, StatusCode: http.StatusBadGateway})
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: faultinject.NewTransport(srv.Client().Transport, faults)}
	get := func() {
		resp, err := client.Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		fmt.Printf("%d %q\n", resp.StatusCode, resp.Header.Get(faultinject.HeaderInjected))
	}

	get()
	faults.Enable()
	get()
	if err := faults.Set(faultinject.Config{ResetShare: 1}); err != nil {
		panic(err)
	}
	resp, err := client.Get(srv.URL)
	if resp != nil {
		resp.Body.Close()
	}
	fmt.Println(errors.Is(err, faultinject.ErrInjected))
	// Output:
	// 200 ""
	// 502 "server_error"
	// true
}

// A drill on a manual clock: the faults open the breaker, callers get the
// fallback at once, and after the stop the breaker's probes close it.
func Example_drill() {
	clock := new(metrics.ManualClock)
	quiet := slog.New(slog.DiscardHandler) // a real drill would keep the transition logs
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock, Logger: quiet})
	defer reg.Close(context.Background())
	profiles, err := reg.NewGroup("profiles", command.GroupConfig{
		Strategy:       command.Semaphore,
		CommandBreaker: circuit.Config{MinRequests: 10, OpenDuration: 5 * time.Second},
	})
	if err != nil {
		panic(err)
	}
	faults, err := faultinject.New(faultinject.Config{Seed: 1, ErrorShare: 1})
	if err != nil {
		panic(err)
	}
	cmd := faultinject.Command(getProfile{id: 7}, faults)
	breaker := func() circuit.State {
		b, _ := profiles.CommandBreaker("getProfile")
		return b.State()
	}
	call := func() metrics.Event {
		_, info, _ := command.ExecuteInfo(context.Background(), profiles, cmd)
		return info.Event
	}

	faults.Enable() // the drill starts
	for range 10 {
		call()
	}
	fmt.Println("drill:", breaker(), call())

	faults.Disable() // the drill stops
	clock.Advance(5 * time.Second)
	for range 3 {
		call() // half-open probes
	}
	fmt.Println("after:", breaker(), call())
	// Output:
	// drill: open SHORT_CIRCUITED
	// after: closed SUCCESS
}

// A DNS failure looks to the caller as a real one does: a *net.DNSError
// in the chain, with its text and flags; it also matches ErrInjected.
func ExampleDNSFailure() {
	faults, err := faultinject.New(faultinject.Config{DNSShare: 1, DNS: faultinject.DNSNotFound})
	if err != nil {
		panic(err)
	}
	faults.Enable()
	client := &http.Client{Transport: faultinject.NewTransport(nil, faults)}
	_, err = client.Get("http://inventory.internal:8080/stock")
	var dns *net.DNSError
	fmt.Println(err)
	fmt.Println(errors.As(err, &dns), dns.IsNotFound, errors.Is(err, faultinject.ErrInjected))
	// Output:
	// Get "http://inventory.internal:8080/stock": dial tcp: lookup inventory.internal: no such host
	// true true true
}
