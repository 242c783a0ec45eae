// Command orders shows the durable write path: an order-writing HTTP
// service whose backend goes down. Orders taken while it is up are
// created at once (201 Created); during the outage each one is stored in
// the embedded queue before the client is answered 202 Accepted with a
// token (the queue entry); a client that retries with the same
// Idempotency-Key gets the same token. When the backend is back, the
// replayer drains the queue through the group's breaker, and the backend,
// which honours the key, has applied every order exactly once. It takes
// about two seconds.
//
//	go run ./examples/orders
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/durable"
)

func main() {
	if err := run(os.Stdout, defaultParams()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// params sets the size of the demo.
type params struct {
	Before, During int // orders placed before and during the outage
}

func defaultParams() params { return params{Before: 5, During: 20} }

// backend is the orders database behind its own HTTP API: it applies each
// Idempotency-Key once, and is down while down is set.
type backend struct {
	down       atomic.Bool
	mu         sync.Mutex
	applied    map[string]int // key → times applied (1 when honoured)
	deliveries int
}

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if b.down.Load() {
		http.Error(w, "database unavailable", http.StatusServiceUnavailable)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	b.mu.Lock()
	defer b.mu.Unlock()
	b.deliveries++
	if b.applied[key] == 0 {
		b.applied[key] = 1
	}
	w.WriteHeader(http.StatusCreated)
}

// gateway is the service: POST /orders with an Idempotency-Key header.
type gateway struct {
	group *command.Group
	queue durable.Queue
	apply durable.ApplyFunc
}

// ServeHTTP answers 201 Created (applied), 202 Accepted with the queue
// entry as a token in Location (deferred: stored, applied later), 400
// without a key, 503 when the order could be neither applied nor stored.
func (gw *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		http.Error(w, "Idempotency-Key header required", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	receipt, info, err := command.ExecuteInfo(r.Context(), gw.group, durable.Write{
		Command: "createOrder", Key: key, Payload: body, Apply: gw.apply, Queue: gw.queue})
	switch {
	case err != nil:
		http.Error(w, "order not accepted: "+err.Error(), http.StatusServiceUnavailable)
	case info.Deferred:
		w.Header().Set("Location", "/orders/queued/"+receipt.EntryID)
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, "accepted (%s), token %s\n", info.Event, receipt.EntryID)
	default:
		w.WriteHeader(http.StatusCreated)
	}
}

func run(out io.Writer, p params) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "orders-example")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	q, err := durable.OpenStore(filepath.Join(dir, "orders.queue"))
	if err != nil {
		return err
	}
	defer q.Close()

	db := &backend{applied: map[string]int{}}
	dbSrv := httptest.NewServer(db)
	defer dbSrv.Close()
	apply := func(ctx context.Context, e durable.Entry) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, dbSrv.URL, strings.NewReader(string(e.Payload)))
		if err != nil {
			return err
		}
		req.Header.Set("Idempotency-Key", e.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("orders database: %s", resp.Status)
		}
		return nil
	}

	quiet := slog.New(slog.DiscardHandler)
	reg := command.NewRegistry(command.RegistryConfig{Logger: quiet})
	defer reg.Close(context.Background())
	breaker := circuit.Config{MinRequests: 4, Open: circuit.OpenConfig{Duration: 200 * time.Millisecond}}
	g, err := reg.NewGroup("orders", command.GroupConfig{Strategy: command.Semaphore, Timeout: time.Second,
		Breaker: breaker, CommandBreaker: breaker})
	if err != nil {
		return err
	}
	rp, err := durable.NewReplayer(durable.ReplayerConfig{Queue: q, Group: g, Apply: apply,
		Backoff: 200 * time.Millisecond, Poll: 20 * time.Millisecond, Logger: quiet})
	if err != nil {
		return err
	}
	replayed := make(chan error, 1)
	go func() { replayed <- rp.Run(ctx) }()

	gwSrv := httptest.NewServer(&gateway{group: g, queue: q, apply: apply})
	defer gwSrv.Close()
	place := func(key string) (string, error) {
		req, err := http.NewRequest(http.MethodPost, gwSrv.URL+"/orders", strings.NewReader(`{"order":"`+key+`"}`))
		if err != nil {
			return "", err
		}
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		line := fmt.Sprintf("POST %-9s -> %s %s", key, resp.Status, strings.TrimSpace(string(body)))
		fmt.Fprintln(out, strings.TrimSpace(line))
		return resp.Status, nil
	}

	fmt.Fprintln(out, "== backend up")
	n := 0
	for range p.Before {
		n++
		if _, err := place(fmt.Sprint("order-", n)); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "== backend down")
	db.down.Store(true)
	accepted := 0
	for range p.During {
		n++
		status, err := place(fmt.Sprint("order-", n))
		if err != nil {
			return err
		}
		if status == "202 Accepted" {
			accepted++
		}
	}
	fmt.Fprintln(out, "== a client retries its last order with the same key")
	if _, err := place(fmt.Sprint("order-", n)); err != nil {
		return err
	}
	backlog, err := q.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "== backlog %d, %d orders accepted during the outage; backend back up\n", backlog.Depth, accepted)
	db.down.Store(false)

	deadline := time.Now().Add(30 * time.Second)
	var st durable.ReplayStats
	for {
		st = rp.Stats()
		if s, err := q.Stats(ctx); err == nil && s.Depth == 0 && st.Replayed >= int64(accepted) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the queue did not drain: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-replayed; !errors.Is(err, context.Canceled) {
		return err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	once := 0
	for _, c := range db.applied {
		if c == 1 {
			once++
		}
	}
	fmt.Fprintf(out, "== drained: %d replayed, %d dead-lettered\n", st.Replayed, st.DeadLettered)
	fmt.Fprintf(out, "orders applied exactly once: %d of %d (deliveries %d)\n", once, n, db.deliveries)
	return nil
}
