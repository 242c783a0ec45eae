package durable_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/durable"
	"github.com/bulwark-go/bulwark/durable/queuetest"
	"github.com/bulwark-go/bulwark/internal/logtest"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

func TestStoreStatusHTTP(t *testing.T) {
	queuetest.StatusHTTP(t, func(t *testing.T) durable.Queue { return openStore(t) })
}

func TestStoreOutcomes(t *testing.T) {
	queuetest.Outcomes(t, func(t *testing.T, r durable.Retention) durable.Queue {
		s, err := durable.OpenStore(filepath.Join(t.TempDir(), "queue.db"), durable.KeepOutcomes(r))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	}, func(t *testing.T, q durable.Queue) int {
		n, err := durable.OutcomeRecords(q.(*durable.Store))
		require.NoError(t, err)
		return n
	})
}

func TestOpenStoreRetentionErrors(t *testing.T) {
	for field, r := range map[string]durable.Retention{
		"Retention.Age -1s":    {Age: -time.Second},
		"Retention.Records -1": {Records: -1},
	} {
		path := filepath.Join(t.TempDir(), "queue.db")
		_, err := durable.OpenStore(path, durable.KeepOutcomes(r))
		assert.ErrorIs(t, err, durable.ErrInvalidConfig, field)
		assert.ErrorContains(t, err, field)
		_, statErr := os.Stat(path)
		assert.ErrorIs(t, statErr, os.ErrNotExist, "a bad option creates no file")
	}
}

// applyOne enqueues key and acknowledges it, and returns its receipt.
func applyOne(t *testing.T, q durable.Queue, key string) durable.Receipt {
	t.Helper()
	ctx := context.Background()
	id, err := q.Enqueue(ctx, durable.Entry{Key: key, Command: "write"})
	require.NoError(t, err)
	es, err := q.Lease(ctx, time.Now(), 1)
	require.NoError(t, err)
	require.NoError(t, q.Ack(ctx, es[0]))
	return durable.Receipt{Key: key, EntryID: id}
}

// appliedThenClosed applies key in a new queue file, closed before it
// returns, and returns the file's path and the write's receipt.
func appliedThenClosed(t *testing.T, key string) (string, durable.Receipt) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "queue.db")
	s, err := durable.OpenStore(path)
	require.NoError(t, err)
	r := applyOne(t, s, key)
	require.NoError(t, s.Close())
	return path, r
}

func newStatusHandler(t *testing.T, q durable.Queue, cfg ...durable.StatusConfig) *durable.StatusHandler {
	t.Helper()
	c := durable.StatusConfig{Secret: secret, Logger: slog.New(slog.DiscardHandler)}
	if len(cfg) > 0 {
		c = cfg[0]
	}
	c.Queue = q
	h, err := durable.NewStatusHandler(c)
	require.NoError(t, err)
	return h
}

// serve answers GET path with h, mounted under /status/.
func serve(h http.Handler, method, path string) *httptest.ResponseRecorder {
	mux := http.NewServeMux()
	mux.Handle("/status/", h)
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w
}

func stateOf(t *testing.T, w *httptest.ResponseRecorder) durable.State {
	t.Helper()
	var resp durable.StatusResponse
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &resp), w.Body.String())
	return resp.State
}

// The outcome records are in the file: a Store opened again answers
// applied for a write applied before.
func TestStoreOutcomeSurvivesReopen(t *testing.T) {
	path, r := appliedThenClosed(t, "k")
	st, err := reopen(t, path).Status(context.Background(), r.EntryID)
	require.NoError(t, err)
	assert.Equal(t, durable.StateApplied, st.State)
}

// TestStatusTokenOfAnEarlierQueueFileIsGone: a queue file moved aside and
// created anew numbers its entries from 1 again; a token of the old
// file's entry 1 must not answer for the new file's entry 1, another
// write (another client's order).
func TestStatusTokenOfAnEarlierQueueFileIsGone(t *testing.T) {
	path, r := appliedThenClosed(t, "alice-order")
	token := newStatusHandler(t, reopen(t, path)).Token(r)
	require.NoError(t, os.Rename(path, path+".aside"))

	s := reopen(t, path)
	mine := applyOne(t, s, "bob-order")
	require.Equal(t, r.EntryID, mine.EntryID, "the new file reuses the ID")
	h := newStatusHandler(t, s)
	w := serve(h, http.MethodGet, "/status/"+token)
	assert.Equal(t, http.StatusGone, w.Code, w.Body.String())
	assert.Equal(t, durable.StateExpired, stateOf(t, w))
	w = serve(h, http.MethodGet, "/status/"+h.Token(mine))
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, durable.StateApplied, stateOf(t, w))
}

// An outcome record whose bytes were altered is never read as applied: its
// token answers 500, and the error, naming the file, is logged.
func TestStatusCorruptOutcomeRecord(t *testing.T) {
	path, r := appliedThenClosed(t, "k")
	raw := stored(t, path, "outcome", r.EntryID)
	raw[len(raw)-3] ^= 1
	rewrite(t, path, "outcome", r.EntryID, raw)

	s := reopen(t, path)
	_, err := s.Status(context.Background(), r.EntryID)
	assert.ErrorIs(t, err, durable.ErrCorrupt)
	assert.ErrorContains(t, err, path)
	logs := new(logtest.Buffer)
	h := newStatusHandler(t, s, durable.StatusConfig{Secret: secret, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	w := serve(h, http.MethodGet, "/status/"+h.Token(r))
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.NotContains(t, w.Body.String(), "applied")
	assert.NotContains(t, w.Body.String(), path, "the answer names no file")
	assert.Contains(t, logs.String(), path)
	_, err = s.Enqueue(context.Background(), durable.Entry{Key: "next"})
	assert.NoError(t, err, "a damaged record does not stop the queue")
}

func TestNewStatusHandlerConfigErrors(t *testing.T) {
	s := openStore(t)
	short := []byte("0123456789abcde")
	for name, tc := range map[string]struct {
		cfg  durable.StatusConfig
		want string
	}{
		"no queue":         {durable.StatusConfig{Secret: secret}, "StatusConfig.Queue is nil"},
		"no secret":        {durable.StatusConfig{Queue: s}, "StatusConfig.Secret of 0 bytes, need at least 16"},
		"short secret":     {durable.StatusConfig{Queue: s, Secret: short}, "StatusConfig.Secret of 15 bytes"},
		"short previous":   {durable.StatusConfig{Queue: s, Secret: secret, PreviousSecrets: [][]byte{secret, short}}, "StatusConfig.PreviousSecrets[1] of 15 bytes"},
		"negative backoff": {durable.StatusConfig{Queue: s, Secret: secret, RetryAfter: -time.Second}, "StatusConfig.RetryAfter -1s"},
	} {
		_, err := durable.NewStatusHandler(tc.cfg)
		assert.ErrorIs(t, err, durable.ErrInvalidConfig, name)
		assert.ErrorContains(t, err, tc.want, name)
		if err != nil {
			assert.NotContains(t, err.Error(), string(short), "a secret's bytes are never in an error")
		}
	}
}

// A secret rotated into PreviousSecrets still verifies the tokens it
// signed; a token signed with neither does not.
func TestStatusHandlerSecretRotation(t *testing.T) {
	s := openStore(t)
	r := applyOne(t, s, "k")
	oldToken := newStatusHandler(t, s).Token(r)
	next := []byte("a new secret of thirty-two bytes")
	rotated := newStatusHandler(t, s, durable.StatusConfig{Secret: next, PreviousSecrets: [][]byte{secret}})
	assert.NotEqual(t, oldToken, rotated.Token(r), "new tokens are signed with the new secret")
	assert.Equal(t, rotated.Token(r), rotated.Token(r), "a token is the same for the same write")
	for _, token := range []string{oldToken, rotated.Token(r)} {
		w := serve(rotated, http.MethodGet, "/status/"+token)
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, durable.StateApplied, stateOf(t, w))
	}
	dropped := newStatusHandler(t, s, durable.StatusConfig{Secret: next})
	w := serve(dropped, http.MethodGet, "/status/"+oldToken)
	assert.Equal(t, http.StatusNotFound, w.Code)
}

// Only one spelling of a token verifies: the unused low bits of its last
// base64 character must be zero.
func TestStatusHandlerNonCanonicalToken(t *testing.T) {
	s := openStore(t)
	r := applyOne(t, s, "k")
	h := newStatusHandler(t, s)
	token := h.Token(r)
	require.NotZero(t, len(token)%4, "the token's length leaves unused bits")
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := token[len(token)-1]
	var odd string
	for i := range alphabet {
		if alphabet[i] == last {
			odd = token[:len(token)-1] + string(alphabet[i|1])
		}
	}
	require.NotEqual(t, token, odd)
	raw, err := base64.RawURLEncoding.DecodeString(odd)
	require.NoError(t, err, "a lenient decoder reads it")
	canonical, err := base64.RawURLEncoding.DecodeString(token)
	require.NoError(t, err)
	require.Equal(t, canonical, raw, "as the same bytes")
	assert.Equal(t, http.StatusNotFound, serve(h, http.MethodGet, "/status/"+odd).Code)
}

func TestStatusHandlerMethodsAndMounts(t *testing.T) {
	s := openStore(t)
	h := newStatusHandler(t, s)
	r := applyOne(t, s, "k")
	token := h.Token(r)
	w := serve(h, http.MethodPost, "/status/"+token)
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	assert.Equal(t, "GET, HEAD", w.Header().Get("Allow"))
	assert.Contains(t, w.Body.String(), `"error"`)

	assert.Empty(t, h.Token(durable.Receipt{Key: "k"}), "a write applied at once has no token")

	for name, mount := range map[string]func() http.Handler{
		"pattern": func() http.Handler {
			mux := http.NewServeMux()
			mux.Handle("GET /orders/{id}/status/{token}", h)
			return mux
		},
		"strip prefix": func() http.Handler { return http.StripPrefix("/orders/1/status", h) },
		"bare":         func() http.Handler { return h },
	} {
		w := httptest.NewRecorder()
		mount().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/orders/1/status/"+token, nil))
		assert.Equal(t, http.StatusOK, w.Code, name)
		assert.Equal(t, durable.StateApplied, stateOf(t, w), name)
	}
}

// A queue that fails answers 503 with Retry-After, logged; the answer
// holds no error text.
func TestStatusHandlerQueueError(t *testing.T) {
	s, err := durable.OpenStore(filepath.Join(t.TempDir(), "queue.db"))
	require.NoError(t, err)
	r := applyOne(t, s, "k")
	logs := new(logtest.Buffer)
	h := newStatusHandler(t, s, durable.StatusConfig{Secret: secret, RetryAfter: 2500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, s.Close())
	w := serve(h, http.MethodGet, "/status/"+h.Token(r))
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Equal(t, "3", w.Header().Get("Retry-After"), "RetryAfter, rounded up to whole seconds")
	assert.Equal(t, "no-store", w.Header().Get("Cache-Control"))
	assert.NotContains(t, w.Body.String(), "closed")
	assert.Contains(t, logs.String(), "durable status lookup failed")
	assert.Contains(t, logs.String(), "queue closed")
}

// An accepted write's Retry-After is at least RetryAfter.
func TestStatusHandlerRetryAfter(t *testing.T) {
	s := openStore(t)
	id, err := s.Enqueue(context.Background(), durable.Entry{Key: "k"})
	require.NoError(t, err)
	h := newStatusHandler(t, s, durable.StatusConfig{Secret: secret, RetryAfter: 5 * time.Second})
	w := serve(h, http.MethodGet, "/status/"+h.Token(durable.Receipt{Key: "k", EntryID: id}))
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, durable.StateAccepted, stateOf(t, w))
	assert.Equal(t, "5", w.Header().Get("Retry-After"))
}
