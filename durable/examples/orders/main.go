// Command orders shows the durable write path: an order-writing HTTP
// service whose backend goes down. Orders taken while it is up are
// created at once (201 Created); during the outage each one is stored in
// the embedded queue before the client is answered 202 Accepted with a
// token (the queue entry) in Location: the order's status, which the
// client polls (durable.StatusHandler); a client that retries with the
// same Idempotency-Key gets the same token. When the backend is back, the
// replayer drains the queue through the group's breaker, and the backend,
// which honours the key, has applied every order exactly once, except one
// it refuses (quantity 0), which is dead-lettered; the polls show each
// order accepted, then applied or dead-lettered. It takes about two
// seconds.
//
//	go run ./examples/orders
package main

import (
	"cmp"
	"context"
	"crypto/rand"
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
	"github.com/bulwark-go/bulwark/metrics"
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
// Idempotency-Key once, refuses an order of quantity 0 (422), and is down
// while down is set.
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
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.deliveries++
	if strings.Contains(string(body), `"qty":0`) {
		http.Error(w, "quantity 0", http.StatusUnprocessableEntity)
		return
	}
	if b.applied[key] == 0 {
		b.applied[key] = 1
	}
	w.WriteHeader(http.StatusCreated)
}

// errRefused is the backend's refusal of an order (422): no replay can
// change it, so the replayer dead-letters the order at once.
var errRefused = errors.New("orders database refused the order")

// gateway is the service: POST /orders with an Idempotency-Key header.
type gateway struct {
	group  *command.Group
	queue  durable.Queue
	apply  durable.ApplyFunc
	status *durable.StatusHandler
}

// ServeHTTP answers 201 Created (applied), 202 Accepted with the order's
// status in Location (deferred: stored, applied later), 400 without a
// key, 503 when the order could be neither applied nor stored.
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
	case info.Events.Has(metrics.DegradedDeferred):
		w.Header().Set("Location", "/orders/status/"+gw.status.Token(receipt))
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, "accepted (%s)\n", info.Event)
	default:
		w.WriteHeader(http.StatusCreated)
	}
}

// forge returns location with the last character of its token changed, as
// a client guessing another order's status would.
func forge(location string) string {
	last := "A"
	if strings.HasSuffix(location, last) {
		last = "B"
	}
	return location[:len(location)-1] + last
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
		switch resp.StatusCode {
		case http.StatusCreated:
			return nil
		case http.StatusUnprocessableEntity:
			return fmt.Errorf("%w: %s", errRefused, resp.Status)
		}
		return fmt.Errorf("orders database: %s", resp.Status)
	}

	quiet := slog.New(slog.DiscardHandler)
	reg := command.NewRegistry(command.RegistryConfig{Logger: quiet})
	defer reg.Close(context.Background())
	breaker := circuit.Config{MinRequests: 4, OpenDuration: 200 * time.Millisecond}
	g, err := reg.NewGroup("orders", command.GroupConfig{Strategy: command.Semaphore, Timeout: time.Second,
		Breaker: breaker, CommandBreaker: breaker})
	if err != nil {
		return err
	}
	rp, err := durable.NewReplayer(durable.ReplayerConfig{Queue: q, Group: g, Apply: apply,
		Backoff: 200 * time.Millisecond, Poll: 20 * time.Millisecond, Logger: quiet,
		Classify: func(err error) durable.Verdict {
			if errors.Is(err, errRefused) {
				return durable.Permanent
			}
			return durable.Outage
		}})
	if err != nil {
		return err
	}
	// The secret signs the status tokens: in production it comes from the
	// service's configuration, the same in every process.
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	status, err := durable.NewStatusHandler(durable.StatusConfig{Queue: q, Secret: secret, Logger: quiet})
	if err != nil {
		return err
	}
	replayed := make(chan error, 1)
	go func() { replayed <- rp.Run(ctx) }()

	mux := http.NewServeMux()
	mux.Handle("POST /orders", &gateway{group: g, queue: q, apply: apply, status: status})
	mux.Handle("GET /orders/status/{token}", status)
	gwSrv := httptest.NewServer(mux)
	defer gwSrv.Close()
	// place posts an order and returns the answer's status and Location.
	place := func(key string, qty int) (string, string, error) {
		req, err := http.NewRequest(http.MethodPost, gwSrv.URL+"/orders", strings.NewReader(fmt.Sprintf(`{"order":%q,"qty":%d}`, key, qty)))
		if err != nil {
			return "", "", err
		}
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		line := fmt.Sprintf("POST %-13s -> %s %s", key, resp.Status, strings.TrimSpace(string(body)))
		fmt.Fprintln(out, strings.TrimSpace(line))
		return resp.Status, resp.Header.Get("Location"), nil
	}
	// poll gets an order's status, as its client does.
	poll := func(what, location string) error {
		resp, err := http.Get(gwSrv.URL + location)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		retry := ""
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			retry = " (Retry-After " + ra + ")"
		}
		fmt.Fprintf(out, "GET %-13s -> %d %s%s\n", what, resp.StatusCode, strings.TrimSpace(string(body)), retry)
		return nil
	}

	fmt.Fprintln(out, "== backend up")
	n := 0
	for range p.Before {
		n++
		if _, _, err := place(fmt.Sprint("order-", n), 1); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "== backend down")
	db.down.Store(true)
	accepted, first := 0, ""
	for range p.During {
		n++
		status, location, err := place(fmt.Sprint("order-", n), 1)
		if err != nil {
			return err
		}
		if status == "202 Accepted" {
			accepted++
			first = cmp.Or(first, location)
		}
	}
	status202, refused, err := place("order-qty0", 0)
	if err != nil {
		return err
	}
	if status202 == "202 Accepted" {
		accepted++
	}
	fmt.Fprintln(out, "== a client retries its last order with the same key")
	if _, _, err := place(fmt.Sprint("order-", n), 1); err != nil {
		return err
	}
	fmt.Fprintln(out, "== clients poll the Location of their 202")
	firstKey := fmt.Sprint("order-", p.Before+1)
	if err := poll(firstKey, first); err != nil {
		return err
	}
	if err := poll("forged-token", forge(first)); err != nil {
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
		if s, err := q.Stats(ctx); err == nil && s.Depth == 0 && st.Replayed+st.DeadLettered >= int64(accepted) {
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
	fmt.Fprintf(out, "== drained: %d replayed, %d dead-lettered; the clients poll again\n", st.Replayed, st.DeadLettered)
	if err := poll(firstKey, first); err != nil {
		return err
	}
	if err := poll("order-qty0", refused); err != nil {
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
	fmt.Fprintf(out, "orders applied exactly once: %d of %d valid (deliveries %d)\n", once, n, db.deliveries)
	return nil
}
