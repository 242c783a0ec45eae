package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/dashboard"
)

type getUser struct{}

func (getUser) Run(context.Context) (string, error) { return "ada", nil }

// Serve the page and the stream of a registry under /ops/.
func ExampleNew() {
	reg := command.NewRegistry(command.RegistryConfig{Logger: slog.New(slog.DiscardHandler)})
	defer reg.Close(context.Background())
	users, err := reg.NewGroup("users", command.GroupConfig{})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := command.Execute(context.Background(), users, getUser{}); err != nil {
		log.Fatal(err)
	}

	h, err := dashboard.New(reg, dashboard.Config{})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", h))
	srv := httptest.NewServer(mux) // in a service: http.ListenAndServe("127.0.0.1:7979", mux)
	defer srv.Close()

	// Read the first frame of the stream, as the page does.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/ops/hystrix.stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() && sc.Text() != "ping: " {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct{ Type, Name string }
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.Type, ev.Name)
	}
	// Output:
	// HystrixCommand getUser
	// HystrixThreadPool users
	// BulwarkCommand getUser
	// BulwarkGroup users
}

// Mount the stream and the page apart, for example the stream where a
// Hystrix Dashboard or Turbine expects it and the page elsewhere.
func ExampleNewStream() {
	reg := command.NewRegistry(command.RegistryConfig{})
	defer reg.Close(context.Background())

	stream, err := dashboard.NewStream(reg, dashboard.Config{MaxClients: 10})
	if err != nil {
		log.Fatal(err)
	}
	page, err := dashboard.NewPage(dashboard.PageConfig{StreamURL: "/hystrix.stream"})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/hystrix.stream", stream)
	mux.Handle("/debug/bulwark/", http.StripPrefix("/debug/bulwark", page))
	fmt.Println(stream.Config().Interval, stream.Config().MaxClients)
	// Output: 500ms 10
}
