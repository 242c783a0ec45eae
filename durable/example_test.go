package durable_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/bulwark-go/bulwark/durable"
)

// A status handler mounted in a mux answers the token of a deferred write
// while it waits and once it was applied.
func ExampleStatusHandler() {
	dir, _ := os.MkdirTemp("", "status-example")
	defer os.RemoveAll(dir)
	q, err := durable.OpenStore(filepath.Join(dir, "orders.queue"))
	if err != nil {
		panic(err)
	}
	defer q.Close()
	status, err := durable.NewStatusHandler(durable.StatusConfig{Queue: q, Secret: []byte("a secret of at least 16 bytes")})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /orders/status/{token}", status)

	// What a Write's fallback does when the dependency is down.
	ctx := context.Background()
	id, _ := q.Enqueue(ctx, durable.Entry{Key: "order-1", Command: "createOrder"})
	location := "/orders/status/" + status.Token(durable.Receipt{Key: "order-1", EntryID: id})

	poll := func() {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, location, nil))
		var resp durable.StatusResponse
		_ = json.Unmarshal(w.Body.Bytes(), &resp)
		fmt.Println(w.Code, resp.State, "Retry-After:", w.Header().Get("Retry-After"))
	}
	poll()
	es, _ := q.Lease(ctx, time.Now(), 1) // what a Replayer does once the replay succeeded
	_ = q.Ack(ctx, es[0])
	poll()
	// Output:
	// 200 accepted Retry-After: 1
	// 200 applied Retry-After:
}
