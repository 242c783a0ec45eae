package queuetest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/durable"
	"github.com/bulwark-go/bulwark/metrics"
)

func status(t *testing.T, q durable.Queue, id string) durable.Status {
	t.Helper()
	st, err := q.Status(ctx, id)
	require.NoError(t, err, "status of %s", id)
	return st
}

// statusStates follows one write through accepted, applied, and another
// through dead-lettered, requeued (accepted again) and applied.
func statusStates(t *testing.T, q durable.Queue) {
	before := time.Now()
	id := enqueue(t, q, "k1")
	st := status(t, q, id)
	assert.Equal(t, durable.StateAccepted, st.State)
	assert.Equal(t, id, st.Entry.ID)
	assert.Equal(t, "k1", st.Entry.Key)
	assert.WithinDuration(t, before, st.Entry.EnqueuedAt, time.Minute)
	assert.Zero(t, st.AppliedAt)

	e := lease(t, q, 1)[0]
	e.Attempts, e.Deliveries, e.NotBefore = 1, 2, time.Now().Add(time.Hour)
	require.NoError(t, q.Update(ctx, e))
	st = status(t, q, id)
	assert.Equal(t, durable.StateAccepted, st.State)
	assert.Equal(t, 1, st.Entry.Attempts)
	assert.Equal(t, 2, st.Entry.Deliveries)
	assert.WithinDuration(t, e.NotBefore, st.Entry.NotBefore, time.Millisecond)

	acked := time.Now()
	require.NoError(t, q.Ack(ctx, e))
	st = status(t, q, id)
	assert.Equal(t, durable.StateApplied, st.State, "the outcome record outlives the entry")
	assert.Equal(t, id, st.Entry.ID)
	assert.Equal(t, "k1", st.Entry.Key)
	assert.Equal(t, "g", st.Entry.Group)
	assert.Equal(t, "write", st.Entry.Command)
	assert.Equal(t, 1, st.Entry.Attempts)
	assert.Equal(t, 2, st.Entry.Deliveries)
	assert.Empty(t, st.Entry.Payload, "an outcome record keeps no payload")
	assert.WithinDuration(t, before, st.Entry.EnqueuedAt, time.Minute)
	assert.False(t, st.AppliedAt.Before(acked.Add(-time.Second)), "applied at %v, acked at %v", st.AppliedAt, acked)
	assert.WithinDuration(t, acked, st.AppliedAt, time.Minute)
	require.NoError(t, q.Ack(ctx, e))
	assert.Equal(t, st.AppliedAt, status(t, q, id).AppliedAt, "a second Ack changes nothing")

	dead := enqueue(t, q, "k2")
	e = lease(t, q, 1)[0]
	e.Attempts, e.Deliveries, e.LastError, e.Reason = 3, 3, "refused", durable.ReasonAttempts
	require.NoError(t, q.DeadLetter(ctx, e))
	st = status(t, q, dead)
	assert.Equal(t, durable.StateDeadLettered, st.State)
	assert.Equal(t, "k2", st.Entry.Key)
	assert.Equal(t, durable.ReasonAttempts, st.Entry.Reason)
	assert.Equal(t, 3, st.Entry.Attempts)
	assert.Equal(t, 3, st.Entry.Deliveries)

	require.NoError(t, q.Requeue(ctx, dead))
	st = status(t, q, dead)
	assert.Equal(t, durable.StateAccepted, st.State, "a requeued write is accepted again, under its first ID too")
	assert.Equal(t, "k2", st.Entry.Key)
	assert.Zero(t, st.Entry.Attempts)
	e = lease(t, q, 1)[0]
	assert.Equal(t, st.Entry.ID, e.ID, "Status names the ID the write has now")
	require.NoError(t, q.Ack(ctx, e))
	st = status(t, q, dead)
	assert.Equal(t, durable.StateApplied, st.State)
	assert.Equal(t, "k2", st.Entry.Key)

	for _, id := range []string{"", "999999", "1-0", "not-an-id", "x"} {
		_, err := q.Status(ctx, id)
		assert.ErrorIs(t, err, durable.ErrNotFound, "id %q", id)
	}
}

// Outcomes checks the bound of a backend's outcome records (see
// durable.Retention). open returns a new, empty queue with that
// Retention; stored returns how many outcome records q holds in its
// storage (the backend's own way). Past Retention.Records, the oldest
// records go first; past Retention.Age, Status no longer reports a
// record and the next Ack drops it; the keys of applied writes are kept
// regardless (Applied).
func Outcomes(t *testing.T, open func(t *testing.T, r durable.Retention) durable.Queue, stored func(t *testing.T, q durable.Queue) int) {
	applyAll := func(t *testing.T, q durable.Queue, keys ...string) []string {
		t.Helper()
		ids := make([]string, len(keys))
		for i, k := range keys {
			ids[i] = enqueue(t, q, k)
			require.NoError(t, q.Ack(ctx, lease(t, q, 1)[0]))
		}
		return ids
	}
	t.Run("Records", func(t *testing.T) {
		q := open(t, durable.Retention{Records: 3})
		ids := applyAll(t, q, "k0", "k1", "k2", "k3", "k4")
		for i, id := range ids {
			_, err := q.Status(ctx, id)
			if i < 2 {
				assert.ErrorIs(t, err, durable.ErrNotFound, "record %d was pushed out", i)
			} else {
				assert.NoError(t, err, "record %d is among the 3 newest", i)
			}
			applied, err := q.Applied(ctx, fmt.Sprint("k", i))
			require.NoError(t, err)
			assert.True(t, applied, "the applied key %d is kept", i)
		}
		assert.Equal(t, 3, stored(t, q))
	})
	t.Run("Age", func(t *testing.T) {
		q := open(t, durable.Retention{Age: 50 * time.Millisecond})
		ids := applyAll(t, q, "k0", "k1")
		time.Sleep(100 * time.Millisecond)
		for _, id := range ids {
			_, err := q.Status(ctx, id)
			assert.ErrorIs(t, err, durable.ErrNotFound, "a record older than Age is not reported")
		}
		assert.Equal(t, 2, stored(t, q), "not dropped before the next Ack")
		last := applyAll(t, q, "k2")[0]
		assert.Equal(t, 1, stored(t, q), "the next Ack drops the expired records")
		assert.Equal(t, durable.StateApplied, status(t, q, last).State)
	})
	t.Run("Defaults", func(t *testing.T) {
		q := open(t, durable.Retention{})
		ids := applyAll(t, q, "k0", "k1")
		time.Sleep(10 * time.Millisecond)
		for _, id := range ids {
			assert.Equal(t, durable.StateApplied, status(t, q, id).State)
		}
		assert.Equal(t, 2, stored(t, q))
	})
}

// StatusHTTP runs durable.StatusHandler on a real loopback server over a
// queue open returns (new and empty), with a real Replayer: orders
// written while their dependency is down are deferred, and their tokens
// answer accepted, then applied or dead-lettered as the replays go; a
// token altered, signed with another secret, or naming a write the queue
// does not know answers 404 or 410 as StatusHandler documents.
func StatusHTTP(t *testing.T, open func(t *testing.T) durable.Queue) {
	q := open(t)
	quiet := slog.New(slog.DiscardHandler)
	reg := command.NewRegistry(command.RegistryConfig{Logger: quiet})
	t.Cleanup(func() { require.NoError(t, reg.Close(context.Background())) })
	g, err := reg.NewGroup("orders", command.GroupConfig{Strategy: command.Semaphore})
	require.NoError(t, err)

	var mu sync.Mutex
	down, applied := true, map[string]int{}
	errDown, errRefused := errors.New("orders database: 503"), errors.New("orders database: 422")
	apply := func(_ context.Context, e durable.Entry) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case down:
			return errDown
		case e.Key == "order-refused":
			return errRefused
		}
		applied[e.Key]++
		return nil
	}
	rp, err := durable.NewReplayer(durable.ReplayerConfig{Queue: q, Group: g, Apply: apply, Logger: quiet,
		Backoff: 20 * time.Second, MaxBackoff: 20 * time.Second,
		Classify: func(err error) durable.Verdict {
			if errors.Is(err, errRefused) {
				return durable.Permanent
			}
			return durable.Outage
		}})
	require.NoError(t, err)
	secret := []byte("0123456789abcdef0123456789abcdef")
	h, err := durable.NewStatusHandler(durable.StatusConfig{Queue: q, Secret: secret, Logger: quiet})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("GET /orders/status/{token}", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	write := func(key string) (string, durable.Receipt) {
		t.Helper()
		r, info, err := command.ExecuteInfo(ctx, g, durable.Write{Command: "createOrder", Key: key, Payload: []byte("payload"), Apply: apply, Queue: q})
		require.NoError(t, err)
		require.True(t, info.Events.Has(metrics.DegradedDeferred), "the dependency is down: deferred")
		token := h.Token(r)
		require.NotEmpty(t, token)
		return token, r
	}
	accepted := time.Now()
	ok, okReceipt := write("order-1")
	refusedToken, _ := write("order-refused")
	okOrder, refused := "/orders/status/"+ok, "/orders/status/"+refusedToken
	noLeak := func(raw string) {
		t.Helper()
		for _, s := range []string{"order-", "payload", "createOrder", "database"} {
			assert.NotContains(t, raw, s, "an answer holds no key, payload, command or error text")
		}
	}

	got := get(t, srv.URL+okOrder)
	require.Equal(t, http.StatusOK, got.code, got.raw)
	assert.Equal(t, durable.StateAccepted, got.body.State)
	assert.Equal(t, 1, got.body.Deliveries, "the original call reached the dependency")
	assert.Zero(t, got.body.Attempts)
	assert.Zero(t, got.body.NextReplayAt, "due now")
	assert.Equal(t, "1", got.header.Get("Retry-After"))
	assert.Equal(t, "no-store", got.header.Get("Cache-Control"))
	assert.Equal(t, "application/json", got.header.Get("Content-Type"))
	assert.WithinDuration(t, accepted, got.body.AcceptedAt, time.Minute)
	assert.Equal(t, time.UTC, got.body.AcceptedAt.Location())
	noLeak(got.raw)

	n, err := rp.Drain(ctx) // an outage: no attempt, a backoff of 20 s
	require.NoError(t, err)
	require.Zero(t, n)
	got = get(t, srv.URL+okOrder)
	require.Equal(t, http.StatusOK, got.code, got.raw)
	assert.Equal(t, durable.StateAccepted, got.body.State)
	assert.Equal(t, 2, got.body.Deliveries)
	assert.Zero(t, got.body.Attempts, "an outage is no attempt")
	assert.WithinDuration(t, time.Now().Add(20*time.Second), got.body.NextReplayAt, 5*time.Second)
	wait, err := strconv.Atoi(got.header.Get("Retry-After"))
	require.NoError(t, err)
	assert.InDelta(t, 20, wait, 5, "Retry-After: until the write is due")

	mu.Lock()
	down = false
	mu.Unlock()
	later, err := q.Lease(ctx, time.Now().Add(time.Hour), 10)
	require.NoError(t, err)
	require.Len(t, later, 2)
	for _, e := range later { // due now: the test does not wait out the backoff
		e.NotBefore = time.Time{}
		require.NoError(t, q.Update(ctx, e))
	}
	_, err = rp.Drain(ctx)
	require.NoError(t, err)
	got = get(t, srv.URL+okOrder)
	require.Equal(t, http.StatusOK, got.code, got.raw)
	assert.Equal(t, durable.StateApplied, got.body.State)
	assert.Equal(t, 3, got.body.Deliveries)
	assert.Empty(t, got.header.Get("Retry-After"))
	assert.Equal(t, "private, max-age=3600", got.header.Get("Cache-Control"))
	assert.False(t, got.body.AppliedAt.Before(got.body.AcceptedAt))
	noLeak(got.raw)
	mu.Lock()
	assert.Equal(t, 1, applied["order-1"])
	mu.Unlock()

	got = get(t, srv.URL+refused)
	require.Equal(t, http.StatusOK, got.code, got.raw)
	assert.Equal(t, durable.StateDeadLettered, got.body.State)
	assert.Equal(t, durable.ReasonBadRequest, got.body.Reason)
	assert.Equal(t, 1, got.body.Attempts)
	assert.Equal(t, "no-store", got.header.Get("Cache-Control"))
	noLeak(got.raw)

	head, err := http.Head(srv.URL + okOrder)
	require.NoError(t, err)
	body, err := io.ReadAll(head.Body)
	require.NoError(t, err)
	require.NoError(t, head.Body.Close())
	assert.Equal(t, http.StatusOK, head.StatusCode)
	assert.Empty(t, body)

	other, err := durable.NewStatusHandler(durable.StatusConfig{Queue: q, Secret: []byte("another secret, 32 bytes long!!!")})
	require.NoError(t, err)
	unknown := map[string]string{
		"altered tag":      alterByte(t, ok, 0),
		"altered ID":       alterByte(t, ok, -1),
		"signed elsewhere": other.Token(okReceipt),
		"not base64":       "%21%21%21",
		"non-canonical":    ok + "A",
		"too short":        ok[:10],
		"too long":         ok + strings.Repeat("A", 300),
	}
	for name, token := range unknown {
		got := get(t, srv.URL+"/orders/status/"+token)
		assert.Equal(t, http.StatusNotFound, got.code, name)
		assert.Equal(t, `{"state":"unknown"}`+"\n", got.raw, name)
		assert.Equal(t, "no-store", got.header.Get("Cache-Control"), name)
	}
	gone := map[string]string{
		"never issued":    h.Token(durable.Receipt{Key: okReceipt.Key, EntryID: "123456789"}),
		"another write's": h.Token(durable.Receipt{Key: "order-2", EntryID: okReceipt.EntryID}),
	}
	for name, token := range gone {
		got := get(t, srv.URL+"/orders/status/"+token)
		assert.Equal(t, http.StatusGone, got.code, name)
		assert.Equal(t, `{"state":"expired"}`+"\n", got.raw, name)
	}
}

// alterByte returns token with a bit of its i-th byte flipped (counted
// from the end if i is negative): of its tag for i 0, of its entry ID for
// i -1 (a token ends with the ID).
func alterByte(t *testing.T, token string, i int) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(token)
	require.NoError(t, err)
	if i < 0 {
		i += len(raw)
	}
	raw[i] ^= 1
	return base64.RawURLEncoding.EncodeToString(raw)
}

// answer is one HTTP answer of a StatusHandler.
type answer struct {
	code   int
	header http.Header
	raw    string
	body   durable.StatusResponse
}

func get(t *testing.T, url string) answer {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := answer{code: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if resp.Header.Get("Content-Type") == "application/json" {
		require.NoError(t, json.Unmarshal(raw, &a.body), string(raw))
	}
	return a
}
